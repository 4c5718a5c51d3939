//! Rules about the engine's source, read from the files themselves.
//!
//! Imports run one way. The module map at the top of `src/lib.rs` puts the engine's modules
//! in numbered layers; a module may use (`crate::...`) only modules of a lower layer, or of its
//! own layer provided the modules of that layer do not form a circle. This test reads the map
//! and every `crate::` path of `src/**/*.rs` (test modules excepted), and fails on a back-edge,
//! a circle, or a module missing from the map.
//!
//! `unsafe` is where docs/safety.md says. Its table ("Where `unsafe` is") lists every `unsafe`
//! of the engine, one row each; the word is counted in the code of `src/` (comments aside) per
//! file, and a file whose count differs from its rows fails: a new `unsafe` needs its row and
//! its argument.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of the map: module name to layer number.
fn read_map(lib: &str) -> BTreeMap<String, u32> {
    let mut layers = BTreeMap::new();
    for line in lib.lines() {
        // Rows of the form `//! | 3 | `a`, `b` | what they hold |`.
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let mut cells = row.split('|');
        let Some(n) = cells.next().and_then(|c| c.trim().parse::<u32>().ok()) else {
            continue;
        };
        let mods = cells.next().unwrap_or("");
        for name in mods.split('`').skip(1).step_by(2) {
            assert!(
                layers.insert(name.to_string(), n).is_none(),
                "module {name} listed twice in the map"
            );
        }
    }
    layers
}

/// The crate root's re-exports (`pub use m::{A, B};`): item name to module.
fn read_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // One statement per item, a `pub use m::{...};` spread over lines (as rustfmt wraps a
    // long one) joined first.
    let mut statements = Vec::new();
    let mut open: Option<String> = None;
    for line in lib.lines() {
        let t = line.trim();
        match open.as_mut() {
            Some(acc) => acc.push_str(t),
            None if t.starts_with("pub use ") => open = Some(t.to_string()),
            None => continue,
        }
        if t.ends_with(';') {
            statements.extend(open.take());
        }
    }
    for stmt in &statements {
        let rest = stmt.strip_prefix("pub use ").expect("collected above");
        let rest = rest.trim_end_matches(';');
        let (module, items) = rest.split_once("::").expect("pub use m::...");
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let item = item.trim();
            if !item.is_empty() {
                let name = item.rsplit("::").next().unwrap();
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The code of a source file, without comments and without its `#[cfg(test)] mod ...` blocks.
fn code_of(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|n| {
                let n = n.trim_start();
                n.starts_with("mod ") || n.starts_with("pub mod ") || n.starts_with("impl")
            })
        {
            // Skip the item: up to the line that closes its braces.
            let mut depth = 0i32;
            let mut opened = false;
            for l in lines.by_ref() {
                for c in l.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if opened && depth <= 0 {
                    break;
                }
            }
            continue;
        }
        let code = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The first path segment of every `crate::` path in `code` (groups `crate::{a, b::c}` give
/// each member's first segment).
fn crate_roots(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && code[..i].ends_with('$') {
            continue; // `$crate::` in a macro: resolved where the macro is used.
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start => {
                        out.push(ident(&group[j..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to (`btree/insert.rs` -> `btree`).
fn module_of(src_dir: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    if first == "lib.rs" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

/// Every rule broken by the given sources (module name, code), under `lib`'s map.
fn violations(lib: &str, sources: &[(String, String)]) -> Vec<String> {
    let layers = read_map(lib);
    let reexports = read_reexports(lib);
    let mut bad = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in sources {
        let Some(&from) = layers.get(module) else {
            bad.push(format!("module `{module}` is not in lib.rs's module map"));
            continue;
        };
        for root in crate_roots(&code_of(code)) {
            let target = if layers.contains_key(&root) {
                root.clone()
            } else if let Some(m) = reexports.get(&root) {
                m.clone()
            } else {
                bad.push(format!(
                    "{module}: `crate::{root}` names no module of the map"
                ));
                continue;
            };
            if target == *module {
                continue;
            }
            let to = layers[&target];
            if to > from {
                bad.push(format!(
                    "back-edge: `{module}` (layer {from}) uses `{target}` (layer {to})"
                ));
            }
            if to == from {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    // Within a layer: no circle.
    fn reaches(
        edges: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        goal: &str,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in edges.get(from).into_iter().flatten() {
            if next == goal || (seen.insert(next.clone()) && reaches(edges, next, goal, seen)) {
                return true;
            }
        }
        false
    }
    for (a, tos) in &edges {
        for b in tos {
            if reaches(&edges, b, a, &mut BTreeSet::new()) {
                bad.push(format!(
                    "circle within a layer: `{a}` uses `{b}`, which reaches back"
                ));
            }
        }
    }
    bad
}

fn engine_sources() -> (String, Vec<(String, String)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let mut sources = Vec::new();
    for f in files {
        if let Some(m) = module_of(&src, &f) {
            sources.push((m, std::fs::read_to_string(&f).unwrap()));
        }
    }
    (lib, sources)
}

#[test]
fn imports_point_down_the_layers() {
    let (lib, sources) = engine_sources();
    assert!(read_map(&lib).len() > 10, "lib.rs has no module map");
    let bad = violations(&lib, &sources);
    let bad: BTreeSet<_> = bad.into_iter().collect();
    let bad: Vec<_> = bad.into_iter().collect();
    assert!(bad.is_empty(), "import rules broken:\n{}", bad.join("\n"));
}

#[test]
fn every_module_of_the_crate_is_in_the_map() {
    let (lib, _) = engine_sources();
    let layers = read_map(&lib);
    for line in lib.lines() {
        let t = line.trim_start();
        let t = t.strip_prefix("pub ").unwrap_or(t);
        if let Some(name) = t.strip_prefix("mod ") {
            let name = name.trim_end_matches(';');
            assert!(
                layers.contains_key(name),
                "module `{name}` is not in the module map"
            );
        }
    }
}

/// The checker itself: an added back-edge, a circle and an unknown name are each reported.
#[test]
fn the_checker_sees_a_back_edge() {
    let lib = "//! | 0 | `low` | |\n//! | 1 | `high`, `side` | |\npub use high::Thing;\n";
    let ok = [
        (
            "high".to_string(),
            "use crate::low::X;\nuse crate::side;".to_string(),
        ),
        (
            "low".to_string(),
            "// use crate::high::X;\nfn f() {}".to_string(),
        ),
    ];
    assert!(violations(lib, &ok).is_empty());
    let back = [("low".to_string(), "use crate::{error, Thing};".to_string())];
    let v = violations(lib, &back);
    assert!(v.iter().any(|e| e.contains("back-edge: `low`")), "{v:?}");
    assert!(v.iter().any(|e| e.contains("crate::error")), "{v:?}");
    let circle = [
        (
            "high".to_string(),
            "fn f() { crate::side::g() }".to_string(),
        ),
        ("side".to_string(), "use crate::high;".to_string()),
    ];
    assert!(violations(lib, &circle)
        .iter()
        .any(|e| e.contains("circle")));
    let tests_only = [(
        "low".to_string(),
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::high;\n}\n".to_string(),
    )];
    assert!(violations(lib, &tests_only).is_empty());
}

/// Occurrences of the word `unsafe` in a line's code (its `//` comment left out).
fn unsafe_words(line: &str) -> usize {
    let code = match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    };
    code.match_indices("unsafe")
        .filter(|&(i, w)| {
            let before = code[..i].chars().next_back();
            let after = code[i + w.len()..].chars().next();
            let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !ident(before) && !ident(after)
        })
        .count()
}

#[test]
fn safety_md_lists_every_unsafe() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let mut in_code: BTreeMap<String, usize> = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let n: usize = text.lines().map(unsafe_words).sum();
        if n > 0 {
            let rel = f
                .strip_prefix(root.parent().unwrap().parent().unwrap())
                .unwrap();
            in_code.insert(rel.to_string_lossy().into_owned(), n);
        }
    }
    let doc = std::fs::read_to_string(root.join("../../docs/safety.md")).unwrap();
    let mut in_doc: BTreeMap<String, usize> = BTreeMap::new();
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("| `crates/cairn/src/") {
            let file = rest.split('`').next().unwrap();
            *in_doc
                .entry(format!("crates/cairn/src/{file}"))
                .or_default() += 1;
        }
    }
    assert!(
        !in_doc.is_empty(),
        "docs/safety.md has no table of unsafe sites"
    );
    assert_eq!(
        in_code, in_doc,
        "`unsafe` per file in the code (left) and rows per file in docs/safety.md (right)"
    );
}

#[test]
fn words_are_counted_in_code_only() {
    assert_eq!(unsafe_words("    unsafe { f() } // unsafe"), 1);
    assert_eq!(unsafe_words("#![deny(unsafe_code)]"), 0);
    assert_eq!(
        unsafe_words("unsafe impl Send for X {} unsafe fn g() {}"),
        2
    );
}
