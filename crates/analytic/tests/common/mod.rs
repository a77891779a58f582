//! Ground truth for the analytic model's tests: every access of a small program walked through
//! an exact LRU cache, with each miss classified and, for conflict misses, the references that
//! touched the set since the line's previous access.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use loopscope_analytic::{Affine, Cache, Loop, Node, Program};

/// Evaluates an affine expression, the innermost binding of a name first.
pub fn eval(e: &Affine, env: &[(String, i64)]) -> i64 {
    e.constant
        + e.terms
            .iter()
            .map(|(n, k)| k * env.iter().rev().find(|(v, _)| v == n).unwrap().1)
            .sum::<i64>()
}

/// Ground truth per position: compulsory misses (the array's block never touched before),
/// conflict misses, and per competing position the conflict misses whose set it touched (with
/// another block) between the line's previous access and the miss.
pub struct Truth {
    pub compulsory: Vec<i128>,
    pub conflict: Vec<i128>,
    pub sources: Vec<BTreeMap<usize, i128>>,
}

/// Walks every access of `p` at `params` through an LRU cache.
pub fn brute_force(p: &Program, cache: Cache, params: &[(&str, i64)]) -> Truth {
    struct Walk<'p> {
        p: &'p Program,
        cache: Cache,
        /// Per set: resident blocks, most recent first.
        lru: Vec<VecDeque<i64>>,
        /// Per set: every access as (time, position).
        log: Vec<Vec<(u64, usize)>>,
        last_use: HashMap<i64, u64>,
        seen: HashSet<(usize, i64)>,
        time: u64,
        truth: Truth,
    }
    impl Walk<'_> {
        fn access(&mut self, pos: usize, array: usize, block: i64) {
            let s = block.rem_euclid(self.cache.sets) as usize;
            let lru = &mut self.lru[s];
            if let Some(i) = lru.iter().position(|b| *b == block) {
                lru.remove(i);
            } else {
                if !self.seen.contains(&(array, block)) {
                    self.truth.compulsory[pos] += 1;
                } else {
                    self.truth.conflict[pos] += 1;
                    let since = self.last_use[&block];
                    let competitors: BTreeSet<usize> = self.log[s]
                        .iter()
                        .rev()
                        .take_while(|(t, _)| *t > since)
                        .map(|(_, m)| *m)
                        .collect();
                    for m in competitors {
                        *self.truth.sources[pos].entry(m).or_default() += 1;
                    }
                }
                if lru.len() == self.cache.ways as usize {
                    lru.pop_back();
                }
            }
            lru.push_front(block);
            self.seen.insert((array, block));
            self.last_use.insert(block, self.time);
            self.log[s].push((self.time, pos));
            self.time += 1;
        }

        fn walk(&mut self, nodes: &[Node], env: &mut Vec<(String, i64)>, pos: &mut usize) {
            for node in nodes {
                match node {
                    Node::Loop(l) => {
                        let start = *pos;
                        let mut end = start + count_refs(&l.body);
                        for v in values(l, env) {
                            *pos = start;
                            env.push((l.var.clone(), v));
                            self.walk(&l.body, env, pos);
                            env.pop();
                            end = *pos;
                        }
                        *pos = end;
                    }
                    Node::Statement(s) => {
                        for r in &s.refs {
                            let (ai, a) = self
                                .p
                                .arrays
                                .iter()
                                .enumerate()
                                .find(|(_, a)| a.name == r.array)
                                .unwrap();
                            let mut lin = 0;
                            for (k, sub) in r.subscripts.iter().enumerate() {
                                lin = lin * if k == 0 { 1 } else { a.extents[k] } + eval(sub, env);
                            }
                            let block = (a.base_bytes + a.element_bytes * lin)
                                .div_euclid(self.cache.line_bytes);
                            self.access(*pos, ai, block);
                            *pos += 1;
                        }
                    }
                }
            }
        }
    }
    /// The loop's values in execution order: up from the lower bound for a positive step,
    /// down from the upper bound for a negative one.
    fn values(l: &Loop, env: &[(String, i64)]) -> Vec<i64> {
        let (lo, hi) = (eval(&l.lower, env), eval(&l.upper_inclusive, env));
        let step = l.step.unsigned_abs() as usize;
        if l.step > 0 {
            (lo..=hi).step_by(step).collect()
        } else {
            (lo..=hi).rev().step_by(step).collect()
        }
    }
    fn count_refs(nodes: &[Node]) -> usize {
        nodes
            .iter()
            .map(|n| match n {
                Node::Loop(l) => count_refs(&l.body),
                Node::Statement(s) => s.refs.len(),
            })
            .sum()
    }
    let n = count_refs(&p.body);
    let mut w = Walk {
        p,
        cache,
        lru: vec![VecDeque::new(); cache.sets as usize],
        log: vec![Vec::new(); cache.sets as usize],
        last_use: HashMap::new(),
        seen: HashSet::new(),
        time: 0,
        truth: Truth {
            compulsory: vec![0; n],
            conflict: vec![0; n],
            sources: vec![BTreeMap::new(); n],
        },
    };
    let mut env: Vec<(String, i64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    w.walk(&p.body, &mut env, &mut 0);
    w.truth
}
