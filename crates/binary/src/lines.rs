//! Source positions of loops from DWARF line tables and inlining information (addr2line).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::program::{Function, Loop};

/// One frame of an inlined call chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The function (demangled), when DWARF names it.
    pub function: Option<String>,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

/// The DWARF of one file (and its split or separate debug files, which the loader finds).
pub(crate) struct SourceLines {
    loader: addr2line::Loader,
}

impl SourceLines {
    pub fn open(path: &Path) -> Result<SourceLines, String> {
        addr2line::Loader::new(path)
            .map(|loader| SourceLines { loader })
            .map_err(|e| e.to_string())
    }

    /// Fills in the source positions of a function's loops.
    pub fn annotate(&self, function: &mut Function) {
        let blocks = &function.blocks;
        for l in &mut function.loops {
            self.annotate_loop(l, blocks);
        }
    }

    fn annotate_loop(&self, l: &mut Loop, blocks: &[crate::Block]) {
        let frames = self.frames(l.header);
        // The outermost frame with a file is the function's own code: for a header inlined
        // from a library header (`getchar` from stdio.h), the user's line that called it.
        if let Some(own) = frames.iter().rev().find(|f| f.file.is_some()) {
            l.file = own.file.clone();
            l.line = own.line;
        }
        if frames.len() > 1 {
            l.inlined = frames;
        }
        let Some(file) = l.file.clone() else {
            return;
        };
        let mut range: Option<(u32, u32)> = None;
        for &b in &l.block_ids {
            let block = &blocks[b as usize];
            let Ok(rows) = self.loader.find_location_range(block.start, block.end) else {
                continue;
            };
            for (_, _, location) in rows {
                if let (Some(f), Some(line)) = (location.file, location.line) {
                    if f == file && line > 0 {
                        range =
                            Some(range.map_or((line, line), |(a, b)| (a.min(line), b.max(line))));
                    }
                }
            }
        }
        if let Some((min, max)) = range.or(l.line.map(|line| (line, line))) {
            l.line_min = Some(min);
            l.line_max = Some(max);
        }
    }

    /// The call chain at an address, innermost first; empty without DWARF.
    fn frames(&self, address: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        let Ok(mut frames) = self.loader.find_frames(address) else {
            return out;
        };
        while let Ok(Some(frame)) = frames.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok().map(|n| crate::demangle(&n)));
            let (file, line) = frame
                .location
                .map_or((None, None), |l| (l.file.map(str::to_owned), l.line));
            out.push(Frame {
                function,
                file,
                line,
            });
            if out.len() > 64 {
                break;
            }
        }
        if out.iter().all(|f| f.file.is_none()) {
            if let Ok(Some(location)) = self.loader.find_location(address) {
                out = vec![Frame {
                    function: None,
                    file: location.file.map(str::to_owned),
                    line: location.line,
                }];
            }
        }
        out
    }
}
