//! The engine's modules depend only downward: a check that reads `src/` and fails when a
//! module names one in its own layer or above, so a cycle (`db` ↔ `txn`, `heap` ↔ `durable`,
//! `error` ↔ `durable`, `db` ↔ `remote`, `txn` ↔ `worker` were the ones removed) cannot come
//! back silently.
//!
//! What it checks: for every top-level module of `crates/ordo/src` (a file `x.rs` or a directory
//! `x/`), the top-level modules its code names through `crate::` paths — `crate::x::…`, the
//! groups of `use crate::{x, y::…}`, and the crate-root re-exports (`crate::Ordo` is `db`'s,
//! read from `lib.rs`) — must all sit in strictly lower [`LAYERS`]. Comments (doc comments and
//! their intra-doc links included) and test code (`#[cfg(test)]` items and the files of
//! `#[cfg(test)] mod x;`) are not read: a unit test may use the whole crate. `super::` paths
//! stay inside one module and are not checked; neither is the order of submodules inside one.
//!
//! A new top-level module fails the check until it is placed in [`LAYERS`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules of `crates/ordo/src` from the bottom up; a module may name modules of lower
/// layers only. Mirrors the layering in `lib.rs`'s docs.
const LAYERS: &[&[&str]] = &[
    // Leaves: the loom seam, addresses, byte helpers, the GC's safe point.
    &["sync", "addr", "le_bytes", "gc"],
    // The free bitmap, the object header protocol, mapped memory, errors.
    &["bitmap", "object", "mapping", "error"],
    // Regions, slabs and allocation.
    &["heap"],
    // Old versions; files, logs and recovery.
    &["mvcc", "durable"],
    // Transactions: sets, participants, commit, workers, the engine state they share.
    &["txn"],
    // The cluster's vocabulary and serving tables.
    &["remote"],
    // The database handle (and its `serve_*`).
    &["db"],
    // Indexes and tables on transactions.
    &["map"],
    &["tree"],
    &["table"],
];

#[test]
fn modules_depend_only_on_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer_of: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (*m, i)))
        .collect();
    let root_names = root_reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let deps = module_deps(&src, &root_names);
    assert!(deps.contains_key("txn") && deps.contains_key("db"), "read nothing from {src:?}");
    let mut wrong = Vec::new();
    for (module, names) in &deps {
        let Some(&at) = layer_of.get(module.as_str()) else {
            wrong.push(format!("module `{module}` is in no layer: add it to LAYERS"));
            continue;
        };
        for (dep, files) in names {
            match layer_of.get(dep.as_str()) {
                Some(&below) if below < at => {}
                Some(_) => wrong.push(format!(
                    "`{module}` names `crate::{dep}` (its layer or above) in {files:?}"
                )),
                None => wrong.push(format!("`{module}` names `{dep}`, which is in no layer")),
            }
        }
    }
    assert!(wrong.is_empty(), "module layering broken:\n  {}", wrong.join("\n  "));
}

/// The check itself: a cycle and a name from a `use crate::{…}` group are caught; comments and
/// test modules are not read.
#[test]
fn the_reader_sees_groups_and_skips_comments_and_tests() {
    let roots = root_reexports("pub use db::{Config, Ordo};\npub use error::Error;\n");
    let code = "use crate::{heap::Heap, txn};\n// crate::table\n/// [`crate::tree`]\n\
                fn f() -> crate::Error { crate::Ordo::x() }\n\
                #[cfg(test)]\nmod tests {\n    use crate::map::{A, B};\n    fn g() {}\n}\n\
                #[cfg(test)]\nmod more;\n";
    let mut test_files = BTreeSet::new();
    let names = names_in(code, &roots, Path::new("/x/lib.rs"), &mut test_files);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(names, ["db", "error", "heap", "txn"]);
    assert!(test_files.contains(Path::new("/x/more.rs")), "{test_files:?}");
}

/// `crate::Name` → module, from `lib.rs`'s `pub use module::{…}` lines.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let lib = strip_comments(lib);
    for item in lib.split(';') {
        let item = item.trim();
        let Some(rest) = item.rfind("pub use ").map(|i| &item[i + "pub use ".len()..]) else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else { continue };
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            let name = name.trim();
            if !name.is_empty() {
                out.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    out
}

type Deps = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// For each top-level module: the modules it names, with the files that name them.
fn module_deps(src: &Path, roots: &BTreeMap<String, String>) -> Deps {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    // Files of `#[cfg(test)] mod x;` declarations, found while reading their parents: read
    // every file first, then leave those out.
    let mut test_files = BTreeSet::new();
    let mut per_file = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let code = std::fs::read_to_string(file).unwrap();
        let names = names_in(&code, roots, file, &mut test_files);
        per_file.push((file.clone(), top, names));
    }
    let mut deps = Deps::new();
    for (file, top, names) in per_file {
        let entry = deps.entry(top.clone()).or_default();
        if test_files.contains(&file) {
            continue;
        }
        for name in names.into_iter().filter(|n| *n != top) {
            let shown = file.strip_prefix(src).unwrap().display().to_string();
            entry.entry(name).or_default().insert(shown);
        }
    }
    deps
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules `code` (the file `file`) names outside comments and test items;
/// records in `test_files` the files its `#[cfg(test)] mod x;` lines declare.
fn names_in(
    code: &str,
    roots: &BTreeMap<String, String>,
    file: &Path,
    test_files: &mut BTreeSet<PathBuf>,
) -> BTreeSet<String> {
    let code = strip_test_items(&strip_comments(code), file, test_files);
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `ordo_crate::`, not this crate
        }
        let heads: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            top_level_items(group).into_iter().map(|s| head(&s)).collect()
        } else {
            vec![head(rest)]
        };
        for h in heads {
            if h.is_empty() || h == "self" {
                continue;
            }
            let module = if h.starts_with(|c: char| c.is_uppercase()) {
                roots.get(&h).cloned().unwrap_or(h)
            } else {
                h
            };
            out.insert(module);
        }
    }
    out
}

/// The leading identifier of a path.
fn head(path: &str) -> String {
    path.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The comma-separated items of a `{…}` group up to its closing brace (nested groups kept).
fn top_level_items(group: &str) -> Vec<String> {
    let (mut depth, mut item, mut items) = (0usize, String::new(), Vec::new());
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    items.push(item);
    items
}

/// `code` without `//` comments (doc comments included) and `/* */` blocks.
fn strip_comments(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    for line in code.lines() {
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    while let Some(start) = out.find("/*") {
        let end = out[start..].find("*/").map_or(out.len(), |e| start + e + 2);
        out.replace_range(start..end, "");
    }
    out
}

/// `code` without the items under a test-only `#[cfg]` ([`find_test_cfg`]): a braced item to
/// its closing brace, else to its `;`. A `mod x;` so marked adds `x.rs` and `x/mod.rs` of the
/// directory `file` declares its submodules in to `test_files`.
fn strip_test_items(code: &str, file: &Path, test_files: &mut BTreeSet<PathBuf>) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    loop {
        let Some(at) = find_test_cfg(rest) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        let after_attr = &rest[at..];
        let attr_end = after_attr.find(")]").map_or(after_attr.len(), |e| e + 2);
        let item = &after_attr[attr_end..];
        let brace = item.find('{');
        let semi = item.find(';');
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => s + 1,
            (None, Some(s)) => s + 1,
            (Some(b), _) => matching_brace(item, b).map_or(item.len(), |e| e + 1),
            (None, None) => item.len(),
        };
        let declared = item[..end].trim();
        if let Some(name) = declared.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            let dir = file.parent().unwrap();
            let dir =
                if stem == "mod" || stem == "lib" { dir.to_path_buf() } else { dir.join(stem) };
            test_files.insert(dir.join(format!("{}.rs", name.trim())));
            test_files.insert(dir.join(name.trim()).join("mod.rs"));
        }
        rest = &item[end..];
    }
}

/// The offset of the next `#[cfg(test)]` or `#[cfg(all(test, …))]`: attributes that build
/// their item in test builds only (`any(test, …)` does not, and is read as code).
fn find_test_cfg(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = code[from..].find("#[cfg(") {
        let at = from + i;
        let close = code[at..].find(")]").map_or(code.len(), |e| at + e);
        let predicate: String =
            code[at + "#[cfg(".len()..close].chars().filter(|c| !c.is_whitespace()).collect();
        if predicate == "test" || predicate.starts_with("all(test,") {
            return Some(at);
        }
        from = close;
    }
    None
}

/// The offset of the `}` closing the `{` at `open`.
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}
