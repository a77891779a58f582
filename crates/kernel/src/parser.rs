//! The hand-written recursive-descent parser of the kernel subset; it builds the IR directly.
//!
//! Accepted: declarations of `double`/`float`/`int`/`long` scalars and arrays (extents affine in
//! parameters), `for` loops with affine bounds and constant steps (`<`, `<=`, `>`, `>=`;
//! `++`, `--`, `+=`, `-=`, `v = v + c`), blocks, and assignments (`=`, `+=`, `-=`, `*=`, `/=`)
//! whose subscripts are affine in loop variables and parameters. Everything else is refused with
//! its position.
//!
//! A product of two symbols (`j*N`, `M*N`) or a division of one (`N/2`) is affine only once the
//! parameters in it have values: [`parse_kernel_with_values`] folds the `-D` values in there, and
//! only there, so that every other use of a parameter stays symbolic.

use std::collections::HashMap;

use crate::KernelError;
use crate::affine::{Affine, Sym};
use crate::ir::{
    AccessKind, Array, ElemType, Flops, Kernel, Loop, Node, Reference, Side, Statement,
};
use crate::lexer::{Pos, Tok, Token, tokenize};

/// Deepest loop nest accepted; also bounds the parser's recursion.
const MAX_DEPTH: usize = 64;
/// Deepest expression nesting accepted (parentheses, unary minus), to bound recursion.
const MAX_EXPR_DEPTH: usize = 200;
/// Most binary operators accepted in one item: left-leaning chains are walked recursively.
const MAX_OPERATORS: usize = 2000;

/// Parses a kernel file's text; `origin` names it in error messages. Every parameter stays
/// symbolic, so a product or division of parameters (`j*N`, `N/2`) is refused.
pub fn parse_kernel(text: &str, origin: &str) -> Result<Kernel, KernelError> {
    parse_kernel_with_values(text, origin, &[])
}

/// Parses a kernel file's text, folding the parameter values `values` (`-D NAME=VALUE`) into
/// products and divisions that are affine only with them: `a[j*N+i]` with `N = 100` becomes
/// `a[100*j+i]`, `double a[M*N]` a constant extent, `i < N/2` a constant bound (C's division,
/// truncated toward zero). Elsewhere parameters stay symbolic.
pub fn parse_kernel_with_values(
    text: &str,
    origin: &str,
    values: &[(String, i64)],
) -> Result<Kernel, KernelError> {
    let tokens = tokenize(text, origin)?;
    let mut p = Parser {
        tokens,
        at: 0,
        origin: origin.to_owned(),
        kernel: Kernel {
            origin: origin.to_owned(),
            params: Vec::new(),
            param_pos: Vec::new(),
            arrays: Vec::new(),
            scalars: Vec::new(),
            loops: Vec::new(),
            statements: Vec::new(),
            body: Vec::new(),
        },
        arrays: HashMap::new(),
        scalars: HashMap::new(),
        values: values.iter().cloned().collect(),
        scope: Vec::new(),
        expr_depth: 0,
        operators: 0,
    };
    let mut body = Vec::new();
    while p.peek() != &Tok::End {
        if let Some(node) = p.item()? {
            body.push(node);
        }
    }
    p.kernel.body = body;
    if p.kernel.statements.is_empty() {
        return Err(p.error_at(
            p.pos(),
            "the kernel has no statement: expected an assignment".into(),
        ));
    }
    Ok(p.kernel)
}

/// What an assignment stores to.
enum Target {
    /// An array element: the array, its subscripts and where the target is written.
    Array(usize, Vec<Affine>, Pos),
    /// A scalar, by name.
    Scalar(String),
}

/// An expression as parsed, with names already resolved.
#[derive(Debug, Clone)]
enum Expr {
    Int(i64),
    Float,
    Sym(Sym),
    Scalar(ElemType, String),
    Index(usize, Vec<Affine>, Pos),
    Bin(char, Box<Expr>, Box<Expr>, Pos),
    Neg(Box<Expr>),
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    origin: String,
    kernel: Kernel,
    arrays: HashMap<String, usize>,
    scalars: HashMap<String, ElemType>,
    /// Parameter values folded into products and divisions of symbols.
    values: HashMap<String, i64>,
    /// Loop variables in scope, innermost last: (name, loop id).
    scope: Vec<(String, usize)>,
    expr_depth: usize,
    operators: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.tokens[self.at].tok
    }

    fn pos(&self) -> Pos {
        self.tokens[self.at].pos
    }

    fn next(&mut self) -> Token {
        let t = self.tokens[self.at].clone();
        if self.at + 1 < self.tokens.len() {
            self.at += 1;
        }
        t
    }

    fn error_at(&self, pos: Pos, message: String) -> KernelError {
        KernelError::Syntax {
            origin: self.origin.clone(),
            line: pos.line,
            column: pos.column,
            message,
        }
    }

    fn unexpected(&self, expected: &str) -> KernelError {
        self.error_at(
            self.pos(),
            format!("expected {expected}, found {}", self.peek().describe()),
        )
    }

    fn eat(&mut self, punct: &str) -> bool {
        if matches!(self.peek(), Tok::Punct(p) if *p == punct) {
            self.next();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, punct: &str) -> Result<(), KernelError> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{punct}`")))
        }
    }

    fn ident(&mut self, what: &str) -> Result<(String, Pos), KernelError> {
        match self.peek().clone() {
            Tok::Ident(name) if !is_keyword(&name) => {
                let pos = self.pos();
                self.next();
                Ok((name, pos))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn elem_type(&self) -> Option<ElemType> {
        match self.peek() {
            Tok::Ident(name) => match name.as_str() {
                "double" => Some(ElemType::Double),
                "float" => Some(ElemType::Float),
                "int" => Some(ElemType::Int),
                "long" => Some(ElemType::Long),
                _ => None,
            },
            _ => None,
        }
    }

    /// One top-level or body item; declarations give no node.
    fn item(&mut self) -> Result<Option<Node>, KernelError> {
        self.operators = 0;
        self.skip_qualifiers();
        if self.elem_type().is_some() {
            return self.declaration();
        }
        match self.peek() {
            Tok::Ident(k) if k == "for" => self.for_loop().map(Some),
            Tok::Ident(k) if is_type_keyword(k) => Err(self.error_at(
                self.pos(),
                format!("type `{k}` is outside the kernel subset ({TYPES_ACCEPTED})"),
            )),
            Tok::Ident(k) if is_keyword(k) => Err(self.error_at(
                self.pos(),
                format!("`{k}` is outside the kernel subset (expected a declaration, `for` or an assignment)"),
            )),
            Tok::Ident(_) => self.assignment().map(Some),
            Tok::Punct(";") => {
                self.next();
                Ok(None)
            }
            Tok::Punct(op @ ("++" | "--")) => Err(self.error_at(
                self.pos(),
                format!(
                    "the increment `{op}` is outside the kernel subset (write `x {}= 1`)",
                    &op[..1]
                ),
            )),
            Tok::Punct("*") => Err(self.error_at(
                self.pos(),
                "pointer dereference `*` is outside the kernel subset (expected a declaration, \
                 `for` or an assignment to an array element)"
                    .into(),
            )),
            Tok::Punct("{") if self.scope.is_empty() => Err(self.error_at(
                self.pos(),
                "a block `{` outside a loop is outside the kernel subset (expected a declaration, \
                 `for` or an assignment)"
                    .into(),
            )),
            _ => Err(self.unexpected("a declaration, `for` or an assignment")),
        }
    }

    /// The error for a statement that starts with the name `name` at `pos` and goes on with
    /// something an assignment cannot: a call, a declaration of a type or with a qualifier the
    /// subset lacks, or an increment. `None` when the name starts what may be an assignment.
    fn not_an_assignment(&self, name: &str, pos: Pos) -> Option<KernelError> {
        let message = match self.peek() {
            Tok::Punct("(") if name == "swap" => format!(
                "function call `{name}(...)` is outside the kernel subset (kerncraft's `swap` \
                 exchanges arrays between sweeps; delete it to model one sweep of the loop nest)"
            ),
            Tok::Punct("(") => format!("function call `{name}(...)` is outside the kernel subset"),
            Tok::Ident(_) if is_qualifier(name) => {
                format!("`{name}` is outside the kernel subset ({TYPES_ACCEPTED})")
            }
            Tok::Ident(_) => {
                format!("type `{name}` is outside the kernel subset ({TYPES_ACCEPTED})")
            }
            _ => return None,
        };
        Some(self.error_at(pos, message))
    }

    /// `const` and `static`, in any order and number (`static const`, `const static`): C allows
    /// them around the type and they change nothing the tools model.
    fn skip_qualifiers(&mut self) {
        while matches!(self.peek(), Tok::Ident(k) if k == "const" || k == "static") {
            self.next();
        }
    }

    fn declaration(&mut self) -> Result<Option<Node>, KernelError> {
        let elem = self.elem_type().unwrap_or(ElemType::Double);
        self.next();
        self.skip_qualifiers();
        let mut node = None;
        loop {
            if self.peek() == &Tok::Punct("*") {
                return Err(self.error_at(
                    self.pos(),
                    "pointers are outside the kernel subset (declare an array: `double a[N];`)"
                        .into(),
                ));
            }
            let (name, pos) = self.ident("a variable name")?;
            if self.arrays.contains_key(&name) || self.scalars.contains_key(&name) {
                return Err(self.error_at(pos, format!("`{name}` is declared twice")));
            }
            if self.peek() == &Tok::Punct("[") {
                if !self.scope.is_empty() {
                    return Err(self.error_at(pos, "arrays must be declared outside loops".into()));
                }
                let mut extents = Vec::new();
                while self.eat("[") {
                    let at = self.pos();
                    let e = self.expr()?;
                    let extent = self.affine(&e, at, false)?;
                    if extent.as_constant().is_some_and(|c| c <= 0) {
                        return Err(self.error_at(at, "an array extent must be positive".into()));
                    }
                    extents.push(extent);
                    self.expect("]")?;
                }
                if self.peek() == &Tok::Punct("=") {
                    return Err(self.error_at(
                        self.pos(),
                        format!("the initialiser of array `{name}` is outside the kernel subset"),
                    ));
                }
                self.arrays.insert(name.clone(), self.kernel.arrays.len());
                self.kernel.arrays.push(Array {
                    name,
                    elem,
                    extents,
                    pos,
                });
            } else {
                self.scalars.insert(name.clone(), elem);
                self.kernel.scalars.push((name.clone(), elem));
                if self.peek() == &Tok::Punct("=") {
                    // `double t = expr;` inside a loop is a statement on a register value.
                    self.next();
                    let rhs = self.expr()?;
                    if !self.scope.is_empty() {
                        node = Some(self.finish_statement(
                            Target::Scalar(name.clone()),
                            '=',
                            rhs,
                            pos,
                        ));
                    }
                }
            }
            if !self.eat(",") {
                break;
            }
        }
        self.expect(";")?;
        Ok(node)
    }

    fn for_loop(&mut self) -> Result<Node, KernelError> {
        let pos = self.pos();
        if self.scope.len() >= MAX_DEPTH {
            return Err(self.error_at(pos, format!("loops nested deeper than {MAX_DEPTH}")));
        }
        self.next();
        self.expect("(")?;
        if self.elem_type().is_some() {
            self.next();
        } else if let Tok::Ident(t) = self.peek()
            && (is_type_keyword(t)
                || matches!(
                    self.tokens.get(self.at + 1),
                    Some(Token {
                        tok: Tok::Ident(_),
                        ..
                    })
                ))
        {
            return Err(self.error_at(
                self.pos(),
                format!(
                    "type `{t}` is outside the kernel subset (loop variables are `int` or `long`)"
                ),
            ));
        }
        let (var, var_pos) = self.ident("the loop variable")?;
        if self.arrays.contains_key(&var) || self.scope.iter().any(|(n, _)| *n == var) {
            return Err(self.error_at(
                var_pos,
                format!("`{var}` cannot be a loop variable here (already in use)"),
            ));
        }
        self.expect("=")?;
        let at = self.pos();
        let start_expr = self.expr()?;
        let start = self.affine(&start_expr, at, true)?;
        self.expect(";")?;
        let (cond_var, cond_pos) = self.ident("the loop variable in the condition")?;
        if cond_var != var {
            return Err(self.error_at(
                cond_pos,
                format!("expected the loop variable `{var}` in the condition"),
            ));
        }
        let relation = match self.next().tok {
            Tok::Punct(p @ ("<" | "<=" | ">" | ">=")) => p,
            _ => {
                return Err(self.error_at(
                    cond_pos,
                    "expected `<`, `<=`, `>` or `>=` after the loop variable".into(),
                ));
            }
        };
        let at = self.pos();
        let bound_expr = self.expr()?;
        let bound = self.affine(&bound_expr, at, true)?;
        self.expect(";")?;
        let step = self.step(&var)?;
        self.expect(")")?;
        let upward = matches!(relation, "<" | "<=");
        if upward != (step > 0) {
            return Err(self.error_at(
                pos,
                format!(
                    "the step of `{var}` ({step:+}) moves away from its bound `{relation}` (a \
                     loop `{var} {relation} ...` needs a {} step)",
                    if upward { "positive" } else { "negative" }
                ),
            ));
        }
        let end_inclusive = match relation {
            "<" => bound.checked_add(&Affine::constant(-1)),
            ">" => bound.checked_add(&Affine::constant(1)),
            _ => Some(bound),
        }
        .ok_or_else(|| self.error_at(at, "loop bound overflows".into()))?;
        let id = self.kernel.loops.len();
        self.kernel.loops.push(Loop {
            var: var.clone(),
            start,
            end_inclusive,
            step,
            parent: self.scope.last().map(|(_, l)| *l),
            pos,
        });
        self.scope.push((var, id));
        let body = self.loop_body();
        self.scope.pop();
        Ok(Node::Loop { id, body: body? })
    }

    /// The step of `var`'s loop: `++`, `--`, `+= STEP`, `-= STEP` or `= var ± STEP`, where STEP
    /// is an integer or an expression of parameters with values (`ii += BS` with `-D BS=32`),
    /// folded to its value here since a loop's step is a constant of the IR.
    fn step(&mut self, var: &str) -> Result<i64, KernelError> {
        let pos = self.pos();
        let bad = |p: &Parser| {
            p.error_at(
                pos,
                format!(
                    "expected a constant step of `{var}` (`++{var}`, `{var}++`, `{var} += 2`, \
                     `{var} += BS` with -D BS=VALUE, ...)"
                ),
            )
        };
        if self.eat("++") || self.eat("--") {
            let dir = if self.tokens[self.at - 1].tok == Tok::Punct("++") {
                1
            } else {
                -1
            };
            let (v, _) = self.ident("the loop variable")?;
            return if v == var { Ok(dir) } else { Err(bad(self)) };
        }
        let (v, _) = self.ident("the loop variable")?;
        if v != var {
            return Err(bad(self));
        }
        let tok = self.next().tok;
        let (sign, amount) = match tok {
            Tok::Punct("++") => return Ok(1),
            Tok::Punct("--") => return Ok(-1),
            Tok::Punct(op @ ("+=" | "-=")) => {
                let at = self.pos();
                let e = self.expr()?;
                (
                    if op == "+=" { 1 } else { -1 },
                    self.step_amount(var, &e, at)?,
                )
            }
            Tok::Punct("=") => {
                let (v2, _) = self.ident("the loop variable")?;
                let sign = match self.next().tok {
                    Tok::Punct("+") => 1,
                    Tok::Punct("-") => -1,
                    _ => return Err(bad(self)),
                };
                if v2 != var {
                    return Err(bad(self));
                }
                let at = self.pos();
                let e = self.term()?;
                (sign, self.step_amount(var, &e, at)?)
            }
            _ => return Err(bad(self)),
        };
        let (value, given) = amount;
        let step = value
            .checked_mul(sign)
            .ok_or_else(|| self.error_at(pos, "loop step overflows 64 bits".into()))?;
        if step == 0 {
            return Err(self.error_at(
                pos,
                format!("a loop step must not be zero (the step of `{var}` is {given})"),
            ));
        }
        Ok(step)
    }

    /// The value of a step expression `e` at `at` and how it reads in messages (`BS = 32` for a
    /// parameter's value, the number itself for a constant). Loop variables are refused, and
    /// so is a parameter without a value, naming it.
    fn step_amount(&self, var: &str, e: &Expr, at: Pos) -> Result<(i64, String), KernelError> {
        if let Expr::Sym(Sym::Param(p)) = e
            && self.kernel.params[*p] == var
        {
            return Err(self.error_at(at, format!("the step of `{var}` cannot be `{var}` itself")));
        }
        let affine = self.affine(e, at, false)?;
        if let Some(c) = affine.as_constant() {
            return Ok((c, c.to_string()));
        }
        let text = self.kernel.render(&affine);
        let folded = self.fold(&affine, at)?;
        match folded.as_constant() {
            Some(c) => Ok((c, format!("`{text}` = {c}"))),
            None => {
                let names: Vec<String> = folded
                    .terms
                    .iter()
                    .map(|&(s, _)| self.kernel.sym_name(s).to_owned())
                    .collect();
                Err(KernelError::StepNeedsValue {
                    origin: self.origin.clone(),
                    line: at.line,
                    column: at.column,
                    var: var.to_owned(),
                    step: text,
                    names,
                })
            }
        }
    }

    fn loop_body(&mut self) -> Result<Vec<Node>, KernelError> {
        if !self.eat("{") {
            return Ok(self.item()?.into_iter().collect());
        }
        let mut body = Vec::new();
        while !self.eat("}") {
            if self.peek() == &Tok::End {
                return Err(self.unexpected("`}`"));
            }
            if let Some(node) = self.item()? {
                body.push(node);
            }
        }
        Ok(body)
    }

    fn assignment(&mut self) -> Result<Node, KernelError> {
        let pos = self.pos();
        let (name, name_pos) = self.ident("an assignment target")?;
        if let Some(e) = self.not_an_assignment(&name, name_pos) {
            return Err(e);
        }
        let target = if let Some(&array) = self.arrays.get(&name) {
            let subs = self.subscripts(array, &name, name_pos)?;
            Target::Array(array, subs, name_pos)
        } else if self.scalars.contains_key(&name) {
            Target::Scalar(name.clone())
        } else {
            return Err(self.error_at(
                name_pos,
                format!("cannot assign to `{name}`: expected a declared array or scalar"),
            ));
        };
        if self.scope.is_empty() && matches!(target, Target::Array(..)) {
            return Err(self.error_at(pos, "array assignments must be inside a loop".into()));
        }
        let op = match self.next().tok {
            Tok::Punct("=") => '=',
            Tok::Punct("+=") => '+',
            Tok::Punct("-=") => '-',
            Tok::Punct("*=") => '*',
            Tok::Punct("/=") => '/',
            Tok::Punct(op @ ("++" | "--")) => {
                let written = if matches!(target, Target::Array(..)) {
                    format!("{name}[...]")
                } else {
                    name.clone()
                };
                return Err(self.error_at(
                    name_pos,
                    format!(
                        "the increment `{written}{op}` is outside the kernel subset (write \
                         `{written} {}= 1`)",
                        &op[..1]
                    ),
                ));
            }
            other => {
                return Err(self.error_at(
                    name_pos,
                    format!(
                        "expected `=`, `+=`, `-=`, `*=` or `/=` after `{name}`, found {}",
                        other.describe()
                    ),
                ));
            }
        };
        let rhs = self.expr()?;
        self.expect(";")?;
        Ok(self.finish_statement(target, op, rhs, pos))
    }

    /// Records a statement: its references in execution order, its FLOPs and the scalars it
    /// reads and assigns.
    fn finish_statement(&mut self, target: Target, op: char, rhs: Expr, pos: Pos) -> Node {
        let mut flops = Flops::default();
        let rhs_float = count_flops(&rhs, &self.kernel.arrays, &mut flops);
        let target_float = match &target {
            Target::Array(array, ..) => self.kernel.arrays[*array].elem.is_float(),
            Target::Scalar(name) => self.scalars.get(name).is_some_and(|t| t.is_float()),
        };
        let compound_float = op != '=' && (target_float || rhs_float);
        let mut scalar_reads = Vec::new();
        let mut refs = Vec::new();
        let mut ref_depths = Vec::new();
        let rhs_depth = u32::from(compound_float);
        let mut reads = Reads {
            arrays: &self.kernel.arrays,
            scalars: &mut scalar_reads,
            refs: &mut refs,
            ref_depths: &mut ref_depths,
        };
        reads.collect(&rhs, rhs_depth);
        for (i, r) in refs.iter_mut().enumerate() {
            r.ordinal = i as u32 + 1;
        }
        let mut scalar_target = None;
        if let Target::Scalar(name) = &target {
            if op != '=' {
                scalar_reads.push((name.clone(), rhs_depth));
            }
            scalar_target = Some(name.clone());
        }
        if let Target::Array(array, subscripts, at) = target {
            if op != '=' {
                refs.push(Reference {
                    array,
                    subscripts: subscripts.clone(),
                    kind: AccessKind::Read,
                    side: Side::Left,
                    ordinal: 1,
                    pos: at,
                });
                ref_depths.push(rhs_depth);
            }
            ref_depths.push(0);
            refs.push(Reference {
                array,
                subscripts,
                kind: AccessKind::Write,
                side: Side::Left,
                ordinal: 1,
                pos: at,
            });
        }
        if compound_float {
            add_flop(&mut flops, op);
        }
        let id = self.kernel.statements.len();
        self.kernel.statements.push(Statement {
            loops: self.scope.iter().map(|(_, l)| *l).collect(),
            refs,
            flops,
            ref_depths,
            scalar_target,
            scalar_reads,
            pos,
        });
        Node::Statement(id)
    }

    fn subscripts(
        &mut self,
        array: usize,
        name: &str,
        pos: Pos,
    ) -> Result<Vec<Affine>, KernelError> {
        let mut subs = Vec::new();
        while self.eat("[") {
            let at = self.pos();
            let e = self.expr()?;
            subs.push(self.affine(&e, at, true)?);
            self.expect("]")?;
        }
        let dims = self.kernel.arrays[array].extents.len();
        if subs.len() != dims {
            return Err(self.error_at(
                pos,
                format!(
                    "`{name}` has {dims} dimensions but {} subscripts are given",
                    subs.len()
                ),
            ));
        }
        Ok(subs)
    }

    fn expr(&mut self) -> Result<Expr, KernelError> {
        let mut left = self.term()?;
        loop {
            let pos = self.pos();
            let op = if self.eat("+") {
                '+'
            } else if self.eat("-") {
                '-'
            } else {
                return Ok(left);
            };
            self.count_operator(pos)?;
            let right = self.term()?;
            left = Expr::Bin(op, Box::new(left), Box::new(right), pos);
        }
    }

    fn term(&mut self) -> Result<Expr, KernelError> {
        let mut left = self.unary()?;
        loop {
            let pos = self.pos();
            let op = if self.eat("*") {
                '*'
            } else if self.eat("/") {
                '/'
            } else {
                return Ok(left);
            };
            self.count_operator(pos)?;
            let right = self.unary()?;
            left = Expr::Bin(op, Box::new(left), Box::new(right), pos);
        }
    }

    fn count_operator(&mut self, pos: Pos) -> Result<(), KernelError> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return Err(self.error_at(
                pos,
                format!("expression longer than {MAX_OPERATORS} operators"),
            ));
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Expr, KernelError> {
        self.expr_depth += 1;
        if self.expr_depth > MAX_EXPR_DEPTH {
            return Err(self.error_at(self.pos(), "expression nested too deeply".into()));
        }
        let result = if self.eat("-") {
            self.unary().map(|e| Expr::Neg(Box::new(e)))
        } else if self.eat("+") {
            self.unary()
        } else {
            self.primary()
        };
        self.expr_depth -= 1;
        result
    }

    fn primary(&mut self) -> Result<Expr, KernelError> {
        let token = self.next();
        match token.tok {
            Tok::Int(v) => Ok(Expr::Int(v)),
            Tok::Float(_) => Ok(Expr::Float),
            Tok::Punct("(") => {
                if let Tok::Ident(t) = self.peek()
                    && (is_type_keyword(t) || self.elem_type().is_some())
                {
                    return Err(self.error_at(
                        token.pos,
                        format!("the cast `({t})` is outside the kernel subset"),
                    ));
                }
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Ident(name) if !is_keyword(&name) => self.name(name, token.pos),
            other => Err(self.error_at(
                token.pos,
                format!(
                    "expected a number, a name or `(`, found {}",
                    other.describe()
                ),
            )),
        }
    }

    fn name(&mut self, name: String, pos: Pos) -> Result<Expr, KernelError> {
        if self.peek() == &Tok::Punct("(") {
            return Err(self.error_at(
                pos,
                format!("function call `{name}(...)` is outside the kernel subset"),
            ));
        }
        if let Some(&array) = self.arrays.get(&name) {
            if self.peek() != &Tok::Punct("[") {
                return Err(self.error_at(pos, format!("array `{name}` used without subscripts (pointer arithmetic is outside the kernel subset)")));
            }
            let subs = self.subscripts(array, &name, pos)?;
            return Ok(Expr::Index(array, subs, pos));
        }
        if self.peek() == &Tok::Punct("[") {
            return Err(self.error_at(pos, format!("`{name}` is not a declared array")));
        }
        if let Some((_, id)) = self.scope.iter().rev().find(|(n, _)| *n == name) {
            return Ok(Expr::Sym(Sym::Loop(*id)));
        }
        if let Some(&t) = self.scalars.get(&name) {
            return Ok(Expr::Scalar(t, name));
        }
        let index = match self.kernel.params.iter().position(|p| *p == name) {
            Some(i) => i,
            None => {
                self.kernel.params.push(name);
                self.kernel.param_pos.push(pos);
                self.kernel.params.len() - 1
            }
        };
        Ok(Expr::Sym(Sym::Param(index)))
    }

    /// The affine form of `e`; loop variables are allowed only when `loops_ok`.
    fn affine(&self, e: &Expr, at: Pos, loops_ok: bool) -> Result<Affine, KernelError> {
        let fail = |m: &str| self.error_at(at, m.to_owned());
        let overflow = || fail("constant overflows 64 bits");
        match e {
            Expr::Int(v) => Ok(Affine::constant(*v)),
            Expr::Float => Err(fail(
                "expected an integer expression, found a floating-point constant",
            )),
            Expr::Sym(s @ Sym::Loop(_)) if !loops_ok => Err(self.error_at(
                at,
                format!(
                    "loop variable `{}` cannot appear here",
                    self.kernel.sym_name(*s)
                ),
            )),
            Expr::Sym(s) => Ok(Affine::symbol(*s)),
            Expr::Scalar(..) => Err(fail(
                "expected an affine expression of loop variables and parameters, found a scalar variable",
            )),
            Expr::Index(..) => Err(fail(
                "indirect subscripts (an array inside a subscript or bound) are outside the kernel subset",
            )),
            Expr::Neg(inner) => self
                .affine(inner, at, loops_ok)?
                .checked_scale(-1)
                .ok_or_else(overflow),
            Expr::Bin(op, l, r, pos) => {
                let a = self.affine(l, at, loops_ok)?;
                let b = self.affine(r, at, loops_ok)?;
                match op {
                    '+' => a.checked_add(&b).ok_or_else(overflow),
                    '-' => a.checked_sub(&b).ok_or_else(overflow),
                    '*' => self.product(&a, &b, *pos),
                    _ => self.quotient(&a, &b, *pos),
                }
            }
        }
    }

    /// `a * b`: affine when one factor is constant, at once or with the parameter values folded in.
    fn product(&self, a: &Affine, b: &Affine, pos: Pos) -> Result<Affine, KernelError> {
        let overflow = || self.error_at(pos, "constant overflows 64 bits".into());
        let scaled = |x: &Affine, c: i64| x.checked_scale(c).ok_or_else(overflow);
        match (a.as_constant(), b.as_constant()) {
            (Some(c), _) => return scaled(b, c),
            (_, Some(c)) => return scaled(a, c),
            _ => {}
        }
        let (fa, fb) = (self.fold(a, pos)?, self.fold(b, pos)?);
        match (fa.as_constant(), fb.as_constant()) {
            (Some(x), Some(y)) => x.checked_mul(y).map(Affine::constant).ok_or_else(overflow),
            (Some(c), _) => scaled(b, c),
            (_, Some(c)) => scaled(a, c),
            _ => Err(self.not_affine(a, '*', b, pos)),
        }
    }

    /// `a / b` as C computes it (truncated toward zero): affine when both sides are constant,
    /// at once or with the parameter values folded in.
    fn quotient(&self, a: &Affine, b: &Affine, pos: Pos) -> Result<Affine, KernelError> {
        let (fa, fb) = (self.fold(a, pos)?, self.fold(b, pos)?);
        match (fa.as_constant(), fb.as_constant()) {
            (Some(_), Some(0)) => Err(self.error_at(
                pos,
                format!("`{}`: division by zero", self.render_op(a, '/', b)),
            )),
            (Some(x), Some(y)) => x
                .checked_div(y)
                .map(Affine::constant)
                .ok_or_else(|| self.error_at(pos, "constant overflows 64 bits".into())),
            _ => Err(self.not_affine(a, '/', b, pos)),
        }
    }

    /// `e` with every parameter that has a value replaced by it.
    fn fold(&self, e: &Affine, pos: Pos) -> Result<Affine, KernelError> {
        let mut out = Affine::constant(e.constant);
        for &(sym, c) in &e.terms {
            let value = match sym {
                Sym::Param(p) => self.values.get(&self.kernel.params[p]).copied(),
                Sym::Loop(_) => None,
            };
            let term = match value {
                Some(v) => c.checked_mul(v).map(Affine::constant),
                None => Affine::symbol(sym).checked_scale(c),
            };
            out = term
                .and_then(|t| out.checked_add(&t))
                .ok_or_else(|| self.error_at(pos, "constant overflows 64 bits".into()))?;
        }
        Ok(out)
    }

    /// Why `a op b` is refused: loop variables on both sides of a product or in a division, or
    /// a parameter without a value.
    fn not_affine(&self, a: &Affine, op: char, b: &Affine, pos: Pos) -> KernelError {
        let has_loop = |e: &Affine| e.terms.iter().any(|(s, _)| matches!(s, Sym::Loop(_)));
        let unbound = |e: &Affine| {
            e.terms.iter().find_map(|&(s, _)| match s {
                Sym::Param(p) if !self.values.contains_key(&self.kernel.params[p]) => {
                    Some(self.kernel.params[p].clone())
                }
                _ => None,
            })
        };
        let (what, loops) = if op == '*' {
            ("product", has_loop(a) && has_loop(b))
        } else {
            ("division", has_loop(a) || has_loop(b))
        };
        let name = [a, b]
            .into_iter()
            .filter(|e| !has_loop(e))
            .find_map(unbound);
        let reason = match name {
            Some(name) if !loops => format!(
                "a {what} of symbols is affine only once `{name}` has a value \
                 (give it with -D {name}=VALUE)"
            ),
            _ if op == '*' => "a product of two loop variables is not affine".to_owned(),
            _ => "a division of a loop variable is not affine".to_owned(),
        };
        KernelError::NotAffine {
            origin: self.origin.clone(),
            line: pos.line,
            column: pos.column,
            expression: self.render_op(a, op, b),
            reason,
        }
    }

    /// `a op b` with this kernel's names, each side parenthesised when it has several terms.
    fn render_op(&self, a: &Affine, op: char, b: &Affine) -> String {
        let side = |e: &Affine| {
            let text = self.kernel.render(e);
            if e.terms.len() + usize::from(e.constant != 0) > 1 {
                format!("({text})")
            } else {
                text
            }
        };
        format!("{}{op}{}", side(a), side(b))
    }
}

/// What a refused declaration is told to use instead.
const TYPES_ACCEPTED: &str = "declarations use `double`, `float`, `int` or `long`";

/// Type names of C that the subset does not declare with.
fn is_type_keyword(name: &str) -> bool {
    matches!(
        name,
        "void" | "char" | "struct" | "unsigned" | "signed" | "short" | "union" | "enum"
    )
}

/// C's storage classes and qualifiers besides `const` and `static`, and `typedef`: a
/// declaration with one is refused by name rather than read as an assignment to it.
fn is_qualifier(name: &str) -> bool {
    matches!(
        name,
        "typedef" | "extern" | "register" | "volatile" | "restrict" | "inline" | "auto"
    )
}

fn is_keyword(name: &str) -> bool {
    matches!(
        name,
        "for"
            | "while"
            | "do"
            | "if"
            | "else"
            | "return"
            | "double"
            | "float"
            | "int"
            | "long"
            | "const"
            | "static"
            | "void"
            | "char"
            | "struct"
            | "switch"
            | "goto"
            | "break"
            | "continue"
            | "unsigned"
            | "signed"
            | "short"
            | "sizeof"
            | "union"
            | "enum"
    )
}

/// The values an expression reads, left to right, each with the floating-point operations
/// between it and the value the expression leaves. Subscript expressions were checked affine
/// when parsed.
struct Reads<'a> {
    arrays: &'a [Array],
    /// Scalars by name.
    scalars: &'a mut Vec<(String, u32)>,
    /// Array elements.
    refs: &'a mut Vec<Reference>,
    /// The depth of each of `refs`.
    ref_depths: &'a mut Vec<u32>,
}

impl Reads<'_> {
    /// Collects the reads of `e`, which has `depth` operations above it already.
    fn collect(&mut self, e: &Expr, depth: u32) {
        match e {
            Expr::Scalar(_, name) => self.scalars.push((name.clone(), depth)),
            Expr::Index(array, subs, pos) => {
                self.refs.push(Reference {
                    array: *array,
                    subscripts: subs.clone(),
                    kind: AccessKind::Read,
                    side: Side::Right,
                    ordinal: 0,
                    pos: *pos,
                });
                self.ref_depths.push(depth);
            }
            Expr::Bin(_, l, r, _) => {
                let inner = depth + u32::from(count_flops(e, self.arrays, &mut Flops::default()));
                self.collect(l, inner);
                self.collect(r, inner);
            }
            Expr::Neg(inner) => self.collect(inner, depth),
            Expr::Int(_) | Expr::Sym(_) | Expr::Float => {}
        }
    }
}

/// Counts the FLOPs of `e` into `flops`; returns whether `e` has a floating-point type.
fn count_flops(e: &Expr, arrays: &[Array], flops: &mut Flops) -> bool {
    match e {
        Expr::Int(_) | Expr::Sym(_) => false,
        Expr::Float => true,
        Expr::Scalar(t, _) => t.is_float(),
        Expr::Index(a, ..) => arrays[*a].elem.is_float(),
        Expr::Neg(inner) => count_flops(inner, arrays, flops),
        Expr::Bin(op, l, r, _) => {
            let float = count_flops(l, arrays, flops) | count_flops(r, arrays, flops);
            if float {
                add_flop(flops, *op);
            }
            float
        }
    }
}

fn add_flop(flops: &mut Flops, op: char) {
    match op {
        '+' | '-' => flops.add += 1,
        '*' => flops.mul += 1,
        _ => flops.div += 1,
    }
}
