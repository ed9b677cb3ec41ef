//! File-level import circles inside one crate's `src/`.
//!
//! The rule: file A **imports** file B when A's code names an item that B defines. Every
//! path counts — `use` trees (groups and globs expanded) and paths written in code — when it
//! starts with `crate::`, `super::`, `self::` or the name of a module A declares with
//! `mod name;`. A path is resolved to a file by its module prefix: `crate::a::b::Item`
//! names the deepest existing file among `a/b.rs`, `a/b/mod.rs`, `a.rs`, `a/mod.rs` and the
//! crate root (`lib.rs`, else `main.rs`); when the item after that prefix is re-exported
//! there (`pub use …::Item`, `pub use … as Item`), the path is followed to the file the
//! re-export names, and so on, so a facade never stands in for the file that defines the
//! item. (A glob re-export, `pub use x::*`, is not followed: the item it brings is not
//! knowable from the text; this codebase has none.)
//!
//! Two things are not imports: a `mod child;` declaration, and any path from a module into
//! its own descendants (`lib.rs` into any module, `scan/mod.rs` into `scan/entry.rs`). A
//! folder module composes its parts and the parts import it with `super::`; that pairing
//! is the folder module's shape. A child naming its parent, a sibling naming a sibling and
//! any path across the tree are imports. A `pub use` re-export is not an import of its own
//! either (unless the file's own code uses the name too): the files that use the item
//! through it import the defining file.
//!
//! Test code does not count (see [`super::source`]: `tests.rs`, `tests/`, and items under
//! `#[test]` or `#[cfg(test)]`). Inline `mod name { … }` blocks other than test ones are
//! read as part of their file; this codebase has none.

use std::collections::{BTreeMap, BTreeSet};

use super::source::{Source, ident_at, words};

/// One `use` leaf: the full path it names, written from the importing file.
#[derive(Debug, Clone)]
struct UseLeaf {
    /// The segments, starting with `crate`, `super`, `self` or a name.
    path: Vec<String>,
    /// The name it binds: the alias, the last segment, or `*` for a glob.
    binds: String,
    /// Whether it is a re-export (`pub use`, `pub(crate) use`, …).
    public: bool,
    /// Where it is written.
    offset: usize,
}

/// A parsed file: where it sits in the module tree and what it names.
#[derive(Debug)]
struct Module<'a> {
    source: &'a Source,
    /// Its module path: `[]` for the root, `["scan", "entry"]` for `scan/entry.rs`.
    path: Vec<String>,
    /// The modules it declares with `mod name;`.
    children: BTreeSet<String>,
    uses: Vec<UseLeaf>,
}

/// Why one file imports another: the first path that does, and its line.
#[derive(Debug, Clone)]
struct Edge {
    line: usize,
    path: String,
}

/// Every import circle among `sources`, one crate's non-test files, each a readable chain
/// `a.rs:3 (crate::b::X) → b.rs:9 (crate::a::Y) → a.rs`; `prefix` goes before each path.
pub(crate) fn circles(sources: &[Source], prefix: &str) -> Vec<String> {
    let modules: Vec<Module<'_>> = sources.iter().map(Module::parse).collect();
    let by_relative: BTreeMap<&str, usize> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| (m.source.relative.as_str(), i))
        .collect();
    let graph = imports(&modules, &by_relative);
    let mut found = Vec::new();
    for component in strongly_connected(&graph) {
        let mut uncovered: BTreeSet<usize> = component.iter().copied().collect();
        while let Some(&start) = uncovered.iter().next() {
            let Some(cycle) = shortest_cycle(&graph, start, &component) else {
                break;
            };
            let mut chain = Vec::new();
            for pair in cycle.windows(2) {
                let edge = &graph[pair[0]][&pair[1]];
                chain.push(format!(
                    "{prefix}{}:{} ({})",
                    modules[pair[0]].source.relative, edge.line, edge.path
                ));
                uncovered.remove(&pair[0]);
            }
            chain.push(format!("{prefix}{}", modules[start].source.relative));
            found.push(chain.join(" → "));
        }
    }
    found.sort();
    found
}

impl<'a> Module<'a> {
    fn parse(source: &'a Source) -> Self {
        let relative = source.relative.trim_end_matches(".rs");
        let mut path: Vec<String> = relative.split('/').map(str::to_owned).collect();
        // `a/mod.rs` is module `a`; `lib.rs` and `main.rs` are the root only at the top.
        let root = matches!(path.as_slice(), [only] if only == "lib" || only == "main");
        if root || path.last().is_some_and(|last| last == "mod") {
            path.pop();
        }
        let code = &source.code;
        let children = words(code, "mod")
            .filter_map(|at| {
                let rest = code[at + 3..].trim_start();
                let name = ident_at(rest);
                rest[name.len()..]
                    .trim_start()
                    .starts_with(';')
                    .then(|| name.to_owned())
            })
            .collect();
        let uses = use_statements(code)
            .into_iter()
            .flat_map(|(start, end, public)| {
                let mut leaves = Vec::new();
                use_tree(&code[start..end], &mut Vec::new(), &mut leaves);
                leaves.into_iter().map(move |(path, binds)| UseLeaf {
                    path,
                    binds,
                    public,
                    offset: start,
                })
            })
            .collect();
        Self {
            source,
            path,
            children,
            uses,
        }
    }

    /// Every path this file names, with where: its `use` leaves and the paths in its code
    /// outside `use` statements.
    fn named_paths(&self) -> Vec<(usize, Vec<String>)> {
        let code = &self.source.code;
        let in_use: Vec<(usize, usize)> = use_statements(code)
            .into_iter()
            .map(|(start, end, _)| (start, end))
            .collect();
        let outside_use = |at: &usize| !in_use.iter().any(|&(s, e)| (s..e).contains(at));
        // A re-export is an import only when the file's own code uses the name too.
        let mut paths: Vec<(usize, Vec<String>)> = self
            .uses
            .iter()
            .filter(|leaf| !leaf.public || words(code, &leaf.binds).any(|at| outside_use(&at)))
            .map(|leaf| (leaf.offset, leaf.path.clone()))
            .collect();
        let starts = ["crate", "super", "self"]
            .into_iter()
            .chain(self.children.iter().map(String::as_str));
        for word in starts {
            for at in words(code, word) {
                let before = code[..at].trim_end();
                let continues =
                    before.ends_with("::") || before.ends_with('.') || before.ends_with('$');
                if continues || !outside_use(&at) {
                    continue;
                }
                let path = code_path(&code[at..]);
                if path.len() > 1 {
                    paths.push((at, path));
                }
            }
        }
        paths
    }
}

/// The byte ranges of every `use` tree in `code` (after the keyword, up to its `;`), and
/// whether the statement is a re-export.
fn use_statements(code: &str) -> Vec<(usize, usize, bool)> {
    words(code, "use")
        .map(|at| {
            let before = code[..at].trim_end();
            let public = before.ends_with("pub")
                || before.rsplit_once("pub(").is_some_and(|(_, visibility)| {
                    visibility.ends_with(')') && !visibility.contains(['{', '}', ';'])
                });
            let start = at + 3;
            let end = code[start..].find(';').map_or(code.len(), |e| start + e);
            (start, end, public)
        })
        .collect()
}

/// Expands one use tree (`a::{b, c::d as e, f::*}`) under `prefix` into its leaves:
/// each full path and the name it binds.
fn use_tree(tree: &str, prefix: &mut Vec<String>, leaves: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim();
    if let Some(group_at) = tree.find('{') {
        let head = &tree[..group_at];
        let depth_before = prefix.len();
        prefix.extend(segments(head));
        let inner = &tree[group_at + 1..tree.rfind('}').unwrap_or(tree.len())];
        for part in split_top_level(inner) {
            use_tree(part, prefix, leaves);
        }
        prefix.truncate(depth_before);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim().to_owned())),
        None => (tree, None),
    };
    let mut full = prefix.clone();
    full.extend(segments(path));
    if full.last().is_some_and(|s| s == "self") {
        full.pop();
    }
    let Some(last) = full.last().cloned() else {
        return;
    };
    leaves.push((full, alias.unwrap_or(last)));
}

/// The `::`-separated names of `path`, `*` included.
fn segments(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `text` split at the commas outside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0usize, 0);
    for (at, b) in text.bytes().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&text[from..at]);
                from = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[from..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The path at the start of `code`: names joined by `::`, up to a generic argument list,
/// a group or anything else.
fn code_path(code: &str) -> Vec<String> {
    let mut path = Vec::new();
    let mut rest = code;
    loop {
        let name = ident_at(rest);
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        path.push(name.to_owned());
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    path
}

/// The import graph: for each file, the files it imports and why.
fn imports(
    modules: &[Module<'_>],
    by_relative: &BTreeMap<&str, usize>,
) -> Vec<BTreeMap<usize, Edge>> {
    modules
        .iter()
        .enumerate()
        .map(|(from, module)| {
            let mut edges = BTreeMap::new();
            for (offset, path) in module.named_paths() {
                let Some(to) = resolve(modules, by_relative, from, &path) else {
                    continue;
                };
                let descendant = modules[to].path.starts_with(&module.path);
                if to != from && !descendant {
                    edges.entry(to).or_insert_with(|| Edge {
                        line: module.source.line_of(offset),
                        path: path.join("::"),
                    });
                }
            }
            edges
        })
        .collect()
}

/// The file that defines what `path`, written in `modules[from]`, names; `None` for a
/// path outside the crate.
fn resolve(
    modules: &[Module<'_>],
    by_relative: &BTreeMap<&str, usize>,
    from: usize,
    path: &[String],
) -> Option<usize> {
    let mut at = from;
    let mut path = path.to_vec();
    // Each step follows one re-export; a chain longer than the files is a loop.
    for _ in 0..=modules.len() {
        let absolute = absolute(&modules[at], &path)?;
        let (file, depth) = deepest_file(by_relative, &absolute)?;
        let Some(item) = absolute.get(depth) else {
            return Some(file);
        };
        let reexport = modules[file]
            .uses
            .iter()
            .find(|leaf| leaf.public && &leaf.binds == item)
            .map(|leaf| {
                let mut next = leaf.path.clone();
                next.extend(absolute[depth + 1..].iter().cloned());
                next
            });
        match reexport {
            Some(next) if next != path || at != file => {
                at = file;
                path = next;
            }
            _ => return Some(file),
        }
    }
    None
}

/// `path` written in `module` as a path from the crate root; `None` when it leaves the
/// crate (another crate's name, `std`, …).
fn absolute(module: &Module<'_>, path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let (mut base, rest) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.path.clone(), &path[1..]),
        "super" => {
            let mut base = module.path.clone();
            let supers = path.iter().take_while(|s| *s == "super").count();
            for _ in 0..supers {
                base.pop()?;
            }
            (base, &path[supers..])
        }
        name if module.children.contains(name) => (module.path.clone(), path),
        _ => return None,
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The deepest existing file on module path `absolute`, and how many segments it covers.
fn deepest_file(
    by_relative: &BTreeMap<&str, usize>,
    absolute: &[String],
) -> Option<(usize, usize)> {
    (0..=absolute.len()).rev().find_map(|depth| {
        let module = absolute[..depth].join("/");
        let candidates = if depth == 0 {
            vec!["lib.rs".to_owned(), "main.rs".to_owned()]
        } else {
            vec![format!("{module}.rs"), format!("{module}/mod.rs")]
        };
        candidates
            .iter()
            .find_map(|c| by_relative.get(c.as_str()))
            .map(|&file| (file, depth))
    })
}

/// The strongly connected components of `graph` with more than one file (Tarjan).
fn strongly_connected(graph: &[BTreeMap<usize, Edge>]) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(graph: &[BTreeMap<usize, Edge>], v: usize, s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in graph[v].keys() {
            match s.index[w] {
                None => {
                    visit(graph, w, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(index) if s.on_stack[w] => s.low[v] = s.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort_unstable();
                s.components.push(component);
            }
        }
    }
    let n = graph.len();
    let mut state = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..n {
        if state.index[v].is_none() {
            visit(graph, v, &mut state);
        }
    }
    state.components
}

/// The shortest cycle from `start` back to it inside `component`, as the files in order
/// with `start` at both ends.
fn shortest_cycle(
    graph: &[BTreeMap<usize, Edge>],
    start: usize,
    component: &[usize],
) -> Option<Vec<usize>> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in graph[v].keys() {
            if !component.contains(&w) {
                continue;
            }
            if w == start {
                let mut cycle = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    cycle.push(at);
                }
                cycle.reverse();
                return Some(cycle);
            }
            if w != start && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    None
}
