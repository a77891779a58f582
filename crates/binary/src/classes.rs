//! Instruction classes of spec 001 §6.4: one exclusive class per instruction (branch,
//! floating point, load/store, integer, decided in that order) plus non-exclusive tags, with a
//! user table that overrides the class of whole mnemonics.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use iced_x86::{
    CpuidFeature, FlowControl, Instruction, InstructionInfoFactory, InstructionInfoOptions,
    Mnemonic, OpAccess, OpKind,
};
use serde::{Deserialize, Serialize};

use crate::error::BinaryError;

/// The exclusive instruction class (spec 001's types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Any control transfer (`flow_control() != Next`).
    Br,
    /// x87 and floating-point arithmetic, comparisons and conversions.
    Fp,
    /// A real memory access (not `lea`, not a NOP with a memory operand).
    Ls,
    /// Everything else.
    Int,
}

impl Class {
    fn parse(text: &str) -> Option<Class> {
        match text {
            "br" => Some(Class::Br),
            "fp" => Some(Class::Fp),
            "ls" => Some(Class::Ls),
            "int" => Some(Class::Int),
            _ => None,
        }
    }
}

/// Non-exclusive tags, as bits.
pub mod tag {
    /// Operates on 128-bit vectors.
    pub const SIMD128: u16 = 1;
    /// Operates on 256-bit vectors.
    pub const SIMD256: u16 = 1 << 1;
    /// Operates on 512-bit vectors.
    pub const SIMD512: u16 = 1 << 2;
    /// Fused multiply-add.
    pub const FMA: u16 = 1 << 3;
    /// Packed floating-point arithmetic.
    pub const VECTOR_FP: u16 = 1 << 4;
    /// An x87 instruction.
    pub const X87: u16 = 1 << 5;
    /// Reads memory.
    pub const LOAD: u16 = 1 << 6;
    /// Writes memory.
    pub const STORE: u16 = 1 << 7;
    /// A string instruction (movs, stos, cmps, scas, lods, ins, outs).
    pub const STRING: u16 = 1 << 8;
}

/// Instruction counts per exclusive class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCounts {
    /// Floating-point.
    pub fp: u64,
    /// Load/store.
    pub ls: u64,
    /// Branch.
    pub br: u64,
    /// Integer and the rest.
    pub int: u64,
}

impl ClassCounts {
    /// Counts one instruction.
    pub fn add(&mut self, class: Class) {
        match class {
            Class::Br => self.br += 1,
            Class::Fp => self.fp += 1,
            Class::Ls => self.ls += 1,
            Class::Int => self.int += 1,
        }
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, other: &ClassCounts) {
        self.fp += other.fp;
        self.ls += other.ls;
        self.br += other.br;
        self.int += other.int;
    }

    /// All instructions counted.
    pub fn total(&self) -> u64 {
        self.fp + self.ls + self.br + self.int
    }
}

/// Instruction counts per tag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagCounts {
    /// 128-bit vector instructions.
    pub simd128: u64,
    /// 256-bit vector instructions.
    pub simd256: u64,
    /// 512-bit vector instructions.
    pub simd512: u64,
    /// Fused multiply-adds.
    pub fma: u64,
    /// Packed floating-point arithmetic.
    pub vector_fp: u64,
    /// x87 instructions.
    pub x87: u64,
    /// Instructions that read memory.
    pub load: u64,
    /// Instructions that write memory.
    pub store: u64,
    /// String instructions.
    pub string: u64,
}

impl TagCounts {
    /// Counts one instruction's tags.
    pub fn add(&mut self, tags: u16) {
        let fields = [
            (tag::SIMD128, &mut self.simd128),
            (tag::SIMD256, &mut self.simd256),
            (tag::SIMD512, &mut self.simd512),
            (tag::FMA, &mut self.fma),
            (tag::VECTOR_FP, &mut self.vector_fp),
            (tag::X87, &mut self.x87),
            (tag::LOAD, &mut self.load),
            (tag::STORE, &mut self.store),
            (tag::STRING, &mut self.string),
        ];
        for (bit, field) in fields {
            *field += u64::from(tags & bit != 0);
        }
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, o: &TagCounts) {
        self.simd128 += o.simd128;
        self.simd256 += o.simd256;
        self.simd512 += o.simd512;
        self.fma += o.fma;
        self.vector_fp += o.vector_fp;
        self.x87 += o.x87;
        self.load += o.load;
        self.store += o.store;
        self.string += o.string;
    }
}

/// Decides classes and tags; holds the user's overrides.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    overrides: HashMap<Mnemonic, Class>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    classes: std::collections::BTreeMap<toml::Spanned<String>, toml::Spanned<String>>,
}

/// The largest instruction-class table read (`--classes`); a full table takes a few KiB.
pub const CLASS_TABLE_CAP_BYTES: u64 = 1 << 20;

impl Classifier {
    /// The default classifier of spec 001 §6.4.
    pub fn new() -> Classifier {
        Classifier::default()
    }

    /// Reads an override table: `[classes]` with `mnemonic = "br" | "fp" | "ls" | "int"`.
    pub fn from_toml_file(path: &Path) -> Result<Classifier, BinaryError> {
        let io = |source| BinaryError::Io {
            path: path.to_owned(),
            action: "read",
            source,
        };
        let bytes = loopscope_machine::read_bounded(
            path,
            CLASS_TABLE_CAP_BYTES,
            "instruction-class tables",
        )
        .map_err(io)?;
        let text = String::from_utf8(bytes)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        Classifier::from_toml(path, &text)
    }

    /// Parses an override table; `path` is only used in messages.
    pub fn from_toml(path: &Path, text: &str) -> Result<Classifier, BinaryError> {
        let error = |offset: usize, what: String| {
            let (line, column) = line_column(text, offset);
            BinaryError::ClassTable {
                path: path.to_owned(),
                line,
                column,
                what,
            }
        };
        let table: TableFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            error(offset, e.message().to_owned())
        })?;
        let names = mnemonic_names();
        let mut overrides = HashMap::new();
        for (key, value) in table.classes {
            let mnemonic = names
                .get(key.get_ref().to_ascii_lowercase().as_str())
                .ok_or_else(|| {
                    error(
                        key.span().start,
                        format!("unknown mnemonic `{}`", key.get_ref()),
                    )
                })?;
            let class = Class::parse(value.get_ref()).ok_or_else(|| {
                error(
                    value.span().start,
                    format!("class `{}`: expected br, fp, ls or int", value.get_ref()),
                )
            })?;
            overrides.insert(*mnemonic, class);
        }
        Ok(Classifier { overrides })
    }

    /// A stable description of the overrides, for cache keys.
    pub fn fingerprint(&self) -> Vec<(String, Class)> {
        let mut list: Vec<(String, Class)> = self
            .overrides
            .iter()
            .map(|(m, c)| (format!("{m:?}"), *c))
            .collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list
    }

    /// The class and tags of one instruction.
    pub fn classify(&self, instr: &Instruction, info: &mut InstructionInfoFactory) -> (Class, u16) {
        let tags = tags_of(instr, info);
        let class = match self.overrides.get(&instr.mnemonic()) {
            Some(class) => *class,
            None => default_class(instr, tags),
        };
        (class, tags)
    }
}

fn mnemonic_names() -> HashMap<String, Mnemonic> {
    Mnemonic::values()
        .map(|m| (format!("{m:?}").to_ascii_lowercase(), m))
        .collect()
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn default_class(instr: &Instruction, tags: u16) -> Class {
    if instr.flow_control() != FlowControl::Next {
        Class::Br
    } else if tags & tag::X87 != 0 || fp_facts(instr).arithmetic {
        Class::Fp
    } else if tags & (tag::LOAD | tag::STORE) != 0 {
        Class::Ls
    } else {
        Class::Int
    }
}

const FP_SUFFIXES: [&str; 6] = ["ps", "pd", "ph", "ss", "sd", "sh"];
const FP_CORES: [&str; 28] = [
    "add", "sub", "mul", "div", "sqrt", "min", "max", "rcp", "rsqrt", "rcp14", "rsqrt14", "rcp28",
    "rsqrt28", "hadd", "hsub", "addsub", "dp", "round", "cmp", "comi", "ucomi", "rndscale",
    "getexp", "getmant", "scalef", "range", "reduce", "fixupimm",
];
const FMA_CORES: [&str; 6] = ["fmaddsub", "fmsubadd", "fmadd", "fmsub", "fnmadd", "fnmsub"];

/// What a mnemonic's name says of floating point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FpFacts {
    /// Floating-point arithmetic, comparison or conversion.
    arithmetic: bool,
    /// A fused multiply-add.
    fma: bool,
    /// Packed (vector) rather than scalar.
    packed: bool,
}

impl FpFacts {
    /// From the mnemonic without its `v` prefix.
    fn of_stem(stem: &str) -> FpFacts {
        let arithmetic = stem.starts_with("cvt")
            || FP_SUFFIXES.iter().any(|suffix| {
                stem.strip_suffix(suffix)
                    .is_some_and(|core| FP_CORES.contains(&core) || fma_core(core))
            });
        if !arithmetic {
            return FpFacts::default();
        }
        FpFacts {
            arithmetic,
            fma: fma_core(&stem[..stem.len().saturating_sub(2)]),
            packed: is_packed(stem),
        }
    }
}

/// The floating-point facts of an instruction. Names are looked at once per mnemonic and
/// encoding (formatting them per instruction was a fifth of the analysis of a large library).
fn fp_facts(instr: &Instruction) -> FpFacts {
    static TABLE: OnceLock<Vec<[FpFacts; 2]>> = OnceLock::new();
    if instr.is_string_instruction() {
        return FpFacts::default(); // `cmpsd` the string compare, not the SSE one
    }
    let table = TABLE.get_or_init(|| {
        let mut table = vec![[FpFacts::default(); 2]; Mnemonic::values().len()];
        for m in Mnemonic::values() {
            let name = format!("{m:?}").to_ascii_lowercase();
            let unprefixed = name.strip_prefix('v').unwrap_or(&name);
            if let Some(slot) = table.get_mut(m as usize) {
                *slot = [FpFacts::of_stem(&name), FpFacts::of_stem(unprefixed)];
            }
        }
        table
    });
    let legacy = instr.encoding() == iced_x86::EncodingKind::Legacy;
    table
        .get(instr.mnemonic() as usize)
        .map_or(FpFacts::default(), |f| f[usize::from(!legacy)])
}

fn fma_core(core: &str) -> bool {
    FMA_CORES.iter().any(|f| {
        core.strip_prefix(f)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn tags_of(instr: &Instruction, info: &mut InstructionInfoFactory) -> u16 {
    let mut tags = 0;
    let info = info.info_options(instr, InstructionInfoOptions::NO_REGISTER_USAGE);
    for mem in info.used_memory() {
        match mem.access() {
            OpAccess::Read | OpAccess::CondRead => tags |= tag::LOAD,
            OpAccess::Write | OpAccess::CondWrite => tags |= tag::STORE,
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => tags |= tag::LOAD | tag::STORE,
            _ => {}
        }
    }
    if instr.is_string_instruction() {
        tags |= tag::STRING;
    }
    if instr.cpuid_features().iter().any(is_x87_feature) {
        tags |= tag::X87;
    }
    let fp = fp_facts(instr);
    if fp.arithmetic {
        if fp.fma {
            tags |= tag::FMA;
        }
        if !fp.packed {
            return tags; // scalar arithmetic in a vector register is not SIMD
        }
        tags |= tag::VECTOR_FP;
    }
    tags | vector_width(instr)
}

fn is_packed(stem: &str) -> bool {
    if stem.starts_with("cvt") {
        !["ss", "sd", "sh", "si"].iter().any(|s| stem.contains(s))
    } else {
        stem.ends_with("ps") || stem.ends_with("pd") || stem.ends_with("ph")
    }
}

fn is_x87_feature(f: &CpuidFeature) -> bool {
    matches!(
        f,
        CpuidFeature::FPU
            | CpuidFeature::FPU287
            | CpuidFeature::FPU287XL_ONLY
            | CpuidFeature::FPU387
            | CpuidFeature::FPU387SL_ONLY
    )
}

fn vector_width(instr: &Instruction) -> u16 {
    let mut width = 0;
    for i in 0..instr.op_count() {
        if instr.op_kind(i) != OpKind::Register {
            continue;
        }
        let reg = instr.op_register(i);
        width |= if reg.is_zmm() {
            tag::SIMD512
        } else if reg.is_ymm() {
            tag::SIMD256
        } else if reg.is_xmm() {
            tag::SIMD128
        } else {
            0
        };
    }
    // Report the widest only.
    if width & tag::SIMD512 != 0 {
        tag::SIMD512
    } else if width & tag::SIMD256 != 0 {
        tag::SIMD256
    } else {
        width
    }
}

#[cfg(test)]
mod tests;
