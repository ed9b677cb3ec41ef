use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn package(name: &str, dependencies: &[(&str, Option<&str>)]) -> serde_json::Value {
    let dependencies: Vec<_> = dependencies
        .iter()
        .map(|(on, kind)| json!({"name": on, "kind": kind}))
        .collect();
    json!({"name": name, "dependencies": dependencies})
}

/// A `crates/` folder of its own under the temp dir, removed when dropped.
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        Self(root)
    }

    /// Writes `text` at `path`, relative to the tree: `x/src/lib.rs` is crate `x`'s root.
    fn file(&self, path: &str, text: &str) -> &Self {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    fn root(&self) -> &Path {
        &self.0
    }

    /// What the rule with `heading` (a prefix of it) found.
    fn found(&self, heading: &str) -> Vec<String> {
        source_rules(self.root())
            .into_iter()
            .find(|rule| rule.heading.starts_with(heading))
            .unwrap()
            .found
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_workspace_keeps_its_layers_and_file_lengths() {
    let metadata = metadata().unwrap();
    assert_eq!(layer_violations(&metadata), Vec::<String>::new());
    assert_eq!(
        long_sources(&workspace_root().join("crates")),
        Vec::<String>::new()
    );
}

/// The whole workspace passes every source rule (notes are not failures).
#[test]
fn the_workspace_passes_the_source_rules() {
    for rule in source_rules(&workspace_root().join("crates")) {
        if rule.weight == Weight::Notes {
            continue;
        }
        assert!(rule.found.is_empty(), "{}: {:#?}", rule.heading, rule.found);
    }
}

#[test]
fn a_source_file_above_600_lines_fails_tidy_and_tests_do_not() {
    let tree = Tree::new("long-sources");
    let lines = |n: usize| "// a line\n".repeat(n);
    tree.file("claude-peer-x/src/long.rs", &lines(601))
        .file("claude-peer-x/src/deep/long.rs", &lines(700))
        .file("claude-peer-x/src/fits.rs", &lines(600))
        .file("claude-peer-x/src/tests/long.rs", &lines(900))
        .file("claude-peer-x/src/part/tests.rs", &lines(900));
    let long = long_sources(tree.root());
    assert_eq!(long.len(), 2, "{long:?}");
    assert!(long[0].contains("deep/long.rs has 700 lines"), "{long:?}");
    assert!(long[1].contains("src/long.rs has 601 lines"), "{long:?}");
}

#[test]
fn a_broken_dependency_fails_tidy() {
    let metadata = json!({"packages": [
        package("claude-peer-registry", &[("rustix", None), ("insta", Some("dev"))]),
        package("claude-peer-probe", &[("claude-peer-resolve", None), ("claude-peer-registry", None)]),
        package("claude-peer-resolve", &[("claude-peer-testkit", None), ("claude-peer-testkit", Some("dev"))]),
        package("claude-peer-new", &[]),
        package("claude-peer-testkit", &[("claude-peer-probe", None)]),
    ]});
    assert_eq!(
        layer_violations(&metadata),
        [
            "claude-peer-registry is pure and may not depend on rustix",
            "claude-peer-probe depends on claude-peer-resolve, which is not below it",
            "claude-peer-resolve depends on claude-peer-testkit, which is for tests only",
            "claude-peer-new has no place in the layer table",
        ]
    );
}

#[test]
fn an_import_circle_through_a_reexport_fails_tidy_as_a_chain_of_files() {
    let tree = Tree::new("circle-reexport");
    tree.file("x/src/lib.rs", "mod a;\nmod b;\npub use a::Alpha;\n")
        .file(
            "x/src/a.rs",
            "use crate::b::Beta;\npub struct Alpha(Beta);\n",
        )
        .file(
            "x/src/b.rs",
            "pub struct Beta;\n\nfn f(_: crate::Alpha) {}\n",
        );
    assert_eq!(
        tree.found("file-level import circles"),
        [
            "crates/x/src/a.rs:1 (crate::b::Beta) → crates/x/src/b.rs:3 (crate::Alpha) → crates/x/src/a.rs"
        ]
    );
}

#[test]
fn siblings_naming_each_other_with_super_are_a_circle_and_parent_with_child_is_not() {
    let tree = Tree::new("circle-siblings");
    tree.file("x/src/lib.rs", "mod scan;\n")
        .file(
            "x/src/scan/mod.rs",
            "mod entry;\nmod read;\nconst LIMIT: u8 = 1;\nfn scan() { entry::judge(); }\n",
        )
        .file(
            "x/src/scan/entry.rs",
            "use super::{LIMIT, read::{At, Unread as U}};\npub(super) fn judge() {}\n",
        )
        .file(
            "x/src/scan/read.rs",
            "pub(super) struct At;\n\nfn read() {\n    super::entry::judge();\n}\n",
        );
    assert_eq!(
        tree.found("file-level import circles"),
        [
            "crates/x/src/scan/entry.rs:1 (super::read::At) → crates/x/src/scan/read.rs:4 (super::entry::judge) → crates/x/src/scan/entry.rs"
        ]
    );
}

#[test]
fn a_reexport_is_an_import_only_where_the_file_uses_the_name() {
    let tree = Tree::new("circle-reexport-used");
    tree.file("x/src/lib.rs", "mod a;\nmod b;\nmod c;\n")
        .file(
            "x/src/a.rs",
            "pub(crate) use crate::b::Beta;\npub(crate) struct Alpha;\n",
        )
        .file("x/src/b.rs", "pub(crate) struct Beta(crate::a::Alpha);\n")
        .file(
            "x/src/c.rs",
            "pub(crate) use crate::b::Beta;\nfn f(_: Beta) {}\n",
        );
    assert_eq!(
        tree.found("file-level import circles"),
        Vec::<String>::new()
    );
    tree.file(
        "x/src/b.rs",
        "pub(crate) use crate::c::Gamma;\npub struct Beta(Gamma);\n",
    )
    .file("x/src/c.rs", "pub(crate) struct Gamma(crate::b::Beta);\n");
    assert_eq!(
        tree.found("file-level import circles"),
        [
            "crates/x/src/b.rs:1 (crate::c::Gamma) → crates/x/src/c.rs:1 (crate::b::Beta) → crates/x/src/b.rs"
        ]
    );
}

#[test]
fn a_tree_without_a_circle_passes() {
    let tree = Tree::new("no-circle");
    tree.file(
        "x/src/lib.rs",
        "mod a;\nmod b;\npub use a::Alpha;\npub struct Root;\nfn f() { a::g(); }\n",
    )
    .file(
        "x/src/a.rs",
        "use crate::{Root, b::Beta};\npub struct Alpha;\npub(crate) fn g() {}\n",
    )
    .file("x/src/b.rs", "use super::Root;\npub struct Beta;\n")
    .file(
        "x/src/c/mod.rs",
        "mod d;\nuse d::D;\npub(crate) struct C;\n",
    )
    .file("x/src/c/d.rs", "use super::C;\npub(crate) struct D;\n");
    assert_eq!(
        tree.found("file-level import circles"),
        Vec::<String>::new()
    );
}

#[test]
fn imports_in_tests_comments_and_strings_do_not_count() {
    let tree = Tree::new("circle-tests");
    tree.file("x/src/lib.rs", "mod a;\nmod b;\n")
        .file("x/src/a.rs", "use crate::b::Beta;\npub struct Alpha;\n")
        .file(
            "x/src/b.rs",
            "pub struct Beta;\n// crate::a::Alpha\nconst S: &str = \"crate::a::Alpha\";\n\
             #[cfg(test)]\nmod tests {\n    use crate::a::Alpha;\n}\n\
             #[test]\nfn t() { let _ = crate::a::Alpha; }\n",
        )
        .file("x/src/b/tests.rs", "use crate::a::Alpha;\n")
        .file(
            "x/src/tests/mod.rs",
            "use crate::a::Alpha;\nuse crate::b::Beta;\n",
        );
    assert_eq!(
        tree.found("file-level import circles"),
        Vec::<String>::new()
    );
}

#[test]
fn a_path_names_the_deepest_file_of_its_module_prefix() {
    let tree = Tree::new("circle-deepest");
    // `crate::a::b::Item` is in a/b.rs, not a.rs: the circle is b.rs ↔ c.rs.
    tree.file("x/src/lib.rs", "mod a;\nmod c;\n")
        .file("x/src/a.rs", "pub(crate) mod b;\n")
        .file(
            "x/src/a/b.rs",
            "pub(crate) struct Item;\nfn f() { crate::c::g(); }\n",
        )
        .file("x/src/c.rs", "pub(crate) fn g(_: crate::a::b::Item) {}\n")
        .file("y/src/lib.rs", "mod a;\nmod c;\n")
        .file("y/src/a/mod.rs", "pub(crate) mod b;\n")
        .file(
            "y/src/a/b/mod.rs",
            "pub(crate) struct Item;\nfn f() { crate::c::g(); }\n",
        )
        .file("y/src/c.rs", "pub(crate) fn g(_: crate::a::b::Item) {}\n");
    assert_eq!(
        tree.found("file-level import circles"),
        [
            "crates/x/src/a/b.rs:2 (crate::c::g) → crates/x/src/c.rs:1 (crate::a::b::Item) → crates/x/src/a/b.rs",
            "crates/y/src/a/b/mod.rs:2 (crate::c::g) → crates/y/src/c.rs:1 (crate::a::b::Item) → crates/y/src/a/b/mod.rs",
        ]
    );
}

fn function(name: &str, lines: usize) -> String {
    let body = "    let _ = 1;\n".repeat(lines - 2);
    format!("fn {name}() {{\n{body}}}\n")
}

#[test]
fn a_function_above_100_lines_fails_tidy_and_tests_do_not() {
    let tree = Tree::new("long-functions");
    let braces_in_literals = "fn tricky() {\n    let _ = \"}}}\";\n    let _ = '}';\n    // }\n"
        .to_owned()
        + &"    let _ = 1;\n".repeat(96)
        + "}\n";
    tree.file(
        "x/src/lib.rs",
        &format!(
            "{}{}{}type F = fn(u8) -> u8;\ntrait T {{ fn bodiless(&self); }}\n\
             #[cfg(test)]\nmod tests {{\n{}}}\n#[test]\n{}",
            function("long", 101),
            function("fits", 100),
            braces_in_literals,
            function("in_tests", 150),
            function("a_test", 150),
        ),
    )
    .file("x/src/tests.rs", &function("in_tests_file", 150));
    assert_eq!(
        tree.found("functions above"),
        [
            "crates/x/src/lib.rs:1 fn long has 101 lines, above 100",
            "crates/x/src/lib.rs:202 fn tricky has 101 lines, above 100"
        ]
    );
}

#[test]
fn result_with_a_string_error_fails_in_a_library_and_is_noted_in_the_command() {
    let tree = Tree::new("string-errors");
    let code = "fn a() -> Result<(), String> { Ok(()) }\n\
                fn b() -> std::io::Result<String> { todo!() }\n\
                fn c() -> Result<Vec<String>, Error> { todo!() }\n\
                type D = Result<fn(u8) -> u8, std::string::String>;\n\
                // Result<(), String>\n\
                #[cfg(test)]\nmod tests {\n    fn t() -> Result<(), String> { Ok(()) }\n}\n";
    tree.file("claude-peer-x/src/lib.rs", code)
        .file(&format!("{COMMAND}/src/main.rs"), code);
    let [_, _, library, command] = source_rules(tree.root());
    assert_eq!(
        library.found,
        [
            "crates/claude-peer-x/src/lib.rs:1 Result<(), String>",
            "crates/claude-peer-x/src/lib.rs:4 Result<fn(u8) -> u8, std::string::String>",
        ]
    );
    assert_eq!(library.weight, Weight::Breaks);
    assert_eq!(command.found.len(), 2, "{:?}", command.found);
    assert_eq!(command.weight, Weight::Notes);
}
