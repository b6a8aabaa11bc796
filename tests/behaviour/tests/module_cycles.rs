//! The layout rule of docs/architecture.md, "No cycles": in every crate of the product, the
//! modules under one parent import one another without a cycle, so each reads on its own and the
//! tree reads top-down. A child using its parent (or the parent its child) is nesting, not an
//! edge; test code (`#[cfg(test)]` items and modules) is left out.
//!
//! The source is read as text: modules from `mod` declarations, references from the `crate::`,
//! `super::` and `self::` paths (with `use` groups), resolved to the deepest module they name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The product's crates: their library (or binary) roots. The test crates are not checked.
const CRATES: &[&str] = &[
    "reloader-core",
    "reloader-workloads/apps",
    "reloader-workloads/batch",
    "reloader-workloads/openshift",
    "reloader-workloads/argo",
    "reloader-workloads/crd",
    "reloader-workloads/testkit",
    "reloader-cli",
    "reloader-sidecar",
    "reloader-http",
];

#[test]
fn no_module_imports_cycle_back_to_itself() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        let lib = if src.join("lib.rs").exists() { src.join("lib.rs") } else { src.join("main.rs") };
        found.extend(cycles(&lib).into_iter().map(|cycle| format!("{krate}: {cycle}")));
    }
    assert!(found.is_empty(), "import cycles between modules:\n{}", found.join("\n"));
}

/// The checker finds a cycle where there is one, between siblings at any depth, and none where a
/// child uses its parent.
#[test]
fn the_check_sees_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\n#[cfg(test)]\nmod tests;\n");
    write("a.rs", "use crate::b::B;\npub struct A;\n");
    write("b/mod.rs", "mod inner;\npub use inner::B;\n");
    write("b/inner.rs", "use crate::{c::C, b::Nothing};\npub struct B;\n");
    write("c.rs", "pub struct C;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n");
    write("tests.rs", "use crate::a::A;\nuse crate::c::C;\n");
    assert!(cycles(&dir.path().join("lib.rs")).is_empty(), "only test code closes a loop");

    write("c.rs", "use super::a::A;\npub struct C;\n");
    assert_eq!(cycles(&dir.path().join("lib.rs")), ["a -> b -> c -> a"]);

    write("c.rs", "pub struct C;\n");
    write("b/mod.rs", "mod inner;\nmod other;\npub use inner::B;\n");
    write("b/other.rs", "use super::inner::B;\nuse super::super::c::C;\n");
    write("b/inner.rs", "pub struct B;\nfn f() -> crate::b::other::O { todo!() }\n");
    assert_eq!(cycles(&dir.path().join("lib.rs")), ["b::{inner -> other -> inner}"]);
}

/// Every cycle among the children of any module of the crate rooted at `root`, each as its
/// modules in order (`a -> b -> a`, or `parent::{a -> b -> a}` below the root).
fn cycles(root: &Path) -> Vec<String> {
    let mut modules = BTreeMap::new();
    collect(root, &[], &mut modules);
    let known: BTreeSet<&Vec<String>> = modules.keys().collect();
    // parent -> child -> children it uses
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, text) in &modules {
        for path in references(text) {
            let Some(target) = resolve(module, &path, &known) else { continue };
            let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == module.len() || common == target.len() {
                continue;
            }
            let siblings = edges.entry(module[..common].to_vec()).or_default();
            siblings.entry(module[common].clone()).or_default().insert(target[common].clone());
        }
    }
    let mut found = Vec::new();
    for (parent, graph) in &edges {
        for cycle in find_cycles(graph) {
            let cycle = cycle.join(" -> ");
            found.push(if parent.is_empty() { cycle } else { format!("{}::{{{cycle}}}", parent.join("::")) });
        }
    }
    found
}

/// Reads the module in `file` (at `path` in the crate) and every module it declares, test
/// modules left out, into `modules`: module path -> its source without comments and test items.
fn collect(file: &Path, path: &[String], modules: &mut BTreeMap<Vec<String>, String>) {
    let source = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let text = without_test_items(&without_comments(&source));
    let is_dir_owner = path.is_empty() || file.file_name().is_some_and(|n| n == "mod.rs");
    let children_dir: PathBuf =
        if is_dir_owner { file.parent().unwrap().to_path_buf() } else { file.with_extension("") };
    for child in declared_modules(&text) {
        let flat = children_dir.join(format!("{child}.rs"));
        let nested = children_dir.join(&child).join("mod.rs");
        let child_file = if flat.exists() { flat } else { nested };
        let mut child_path = path.to_vec();
        child_path.push(child);
        collect(&child_file, &child_path, modules);
    }
    modules.insert(path.to_vec(), text);
}

/// `mod name;` declarations (file modules).
fn declared_modules(text: &str) -> Vec<String> {
    let tokens = tokens(text);
    let mut names = Vec::new();
    for window in tokens.windows(3) {
        if window[0] == "mod" && window[2] == ";" && is_ident(&window[1]) {
            names.push(window[1].clone());
        }
    }
    names
}

/// Every `crate::`/`super::`/`self::` path in `text`, `use` groups expanded, as segments
/// (`*` and item names included: resolution keeps the deepest module).
fn references(text: &str) -> Vec<Vec<String>> {
    let tokens = tokens(text);
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let starts = matches!(tokens[i].as_str(), "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts {
            i = path_at(&tokens, i, Vec::new(), &mut paths);
        } else {
            i += 1;
        }
    }
    paths
}

/// Reads one path (with `{...}` groups) starting at `tokens[i]` after `prefix`; returns the index
/// after it.
fn path_at(tokens: &[String], mut i: usize, mut prefix: Vec<String>, paths: &mut Vec<Vec<String>>) -> usize {
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                loop {
                    i = path_at(tokens, i, prefix.clone(), paths);
                    match tokens.get(i).map(String::as_str) {
                        Some(",") => i += 1,
                        Some("}") => return i + 1,
                        _ => return i,
                    }
                    if tokens.get(i).is_some_and(|t| t == "}") {
                        return i + 1;
                    }
                }
            }
            Some(segment) if is_ident(segment) || segment == "*" => {
                prefix.push(segment.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|t| t == "::") {
                    i += 1;
                    continue;
                }
                paths.push(prefix);
                return i;
            }
            _ => {
                if !prefix.is_empty() {
                    paths.push(prefix);
                }
                return i;
            }
        }
    }
}

/// The deepest known module `path` names, seen from `module`.
fn resolve(module: &[String], path: &[String], known: &BTreeSet<&Vec<String>>) -> Option<Vec<String>> {
    let mut absolute: Vec<String> = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            absolute.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        _ => {}
    }
    while rest.first().is_some_and(|s| s == "super") {
        absolute.pop()?;
        rest = &rest[1..];
    }
    let mut deepest = absolute.clone();
    for segment in rest {
        absolute.push(segment.clone());
        if known.contains(&absolute) {
            deepest = absolute.clone();
        } else {
            break;
        }
    }
    Some(deepest)
}

/// Elementary cycles of a small graph, each once, from its least node.
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        let node = path.last().unwrap().clone();
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_string());
                found.push(cycle);
            } else if next.as_str() > start && !path.contains(next) {
                path.push(next.clone());
                walk(graph, start, path, found);
                path.pop();
            }
        }
    }
    let mut found = Vec::new();
    for start in graph.keys() {
        walk(graph, start, &mut vec![start.clone()], &mut found);
    }
    found
}

/// `source` without `//` and `/* */` comments, string and char literals emptied.
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let chars: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            ('r', Some('"' | '#')) if i == 0 || !chars[i - 1].is_alphanumeric() && chars[i - 1] != '_' => {
                // A raw string: r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while chars.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if chars.get(j) != Some(&'"') {
                    out.push(chars[i]);
                    i += 1;
                    continue;
                }
                j += 1;
                while j < chars.len() {
                    if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
            }
            ('"', _) => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            ('\'', _) if chars.get(i + 2) == Some(&'\'') || chars.get(i + 1) == Some(&'\\') => {
                // A char literal ('x', '\n', '\''), not a lifetime.
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// `text` without the items that follow a `#[cfg(test)]` attribute.
fn without_test_items(text: &str) -> String {
    let marker = "#[cfg(test)]";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at]);
        let item = &rest[at + marker.len()..];
        // The item ends at its first `;` or its braced body's end, whichever comes first.
        let mut depth = 0usize;
        let mut end = item.len();
        let mut in_attribute = 0usize;
        for (i, c) in item.char_indices() {
            match c {
                '[' => in_attribute += 1,
                ']' => in_attribute = in_attribute.saturating_sub(1),
                '{' if in_attribute == 0 => depth += 1,
                '}' if in_attribute == 0 => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 && in_attribute == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Identifiers, `::`, and single punctuation characters.
fn tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

fn is_ident(token: &str) -> bool {
    token.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
}
