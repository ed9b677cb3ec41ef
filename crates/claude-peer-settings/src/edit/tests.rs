//! The edit's unit and property tests: spans, layouts, duplicates and round trips.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::parse::is_ws;
use super::*;

fn set_bytes(doc: &[u8], key: &str, value: &Value) -> Result<Option<Vec<u8>>, DocError> {
    Ok(parse(doc)?.set(key, value).map(|s| s.apply(doc)))
}

fn remove_bytes(doc: &[u8], key: &str) -> Result<Option<Vec<u8>>, DocError> {
    Ok(parse(doc)?.remove(key).map(|s| s.apply(doc)))
}

/// The value JSON.parse honours for `key`, parsed.
fn get(doc: &[u8], key: &str) -> Option<Value> {
    serde_json::from_str(parse(doc).unwrap().get(key)?).ok()
}

fn set_str(doc: &str, key: &str, value: &Value) -> String {
    String::from_utf8(set_bytes(doc.as_bytes(), key, value).unwrap().unwrap()).unwrap()
}

fn remove_str(doc: &str, key: &str) -> Option<String> {
    remove_bytes(doc.as_bytes(), key)
        .unwrap()
        .map(|b| String::from_utf8(b).unwrap())
}

#[test]
fn an_empty_file_becomes_a_two_space_document_with_a_final_newline() {
    assert_eq!(
        set_str("", "k", &json!("hold")),
        "{\n  \"k\": \"hold\"\n}\n"
    );
}

#[test]
fn an_empty_object_gets_the_member_like_json_stringify_would_write_it() {
    assert_eq!(set_str("{}", "k", &json!(1)), "{\n  \"k\": 1\n}");
    assert_eq!(remove_str("{\n  \"k\": 1\n}", "k").unwrap(), "{}");
    assert_eq!(
        set_str("{}\r\n", "k", &json!(1)),
        "{\r\n  \"k\": 1\r\n}\r\n"
    );
    assert_eq!(
        remove_str("{\r\n  \"k\": 1\r\n}\r\n", "k").unwrap(),
        "{}\r\n"
    );
}

#[test]
fn an_object_with_inner_whitespace_keeps_it_across_insert_and_remove() {
    for doc in ["{ }", "{\n\n}", "{\t}"] {
        let with = set_str(doc, "k", &json!(true));
        assert_eq!(remove_str(&with, "k").unwrap(), doc);
    }
}

#[test]
fn insertion_copies_the_layout_of_the_last_member() {
    assert_eq!(
        set_str("{\"a\":1}", "k", &json!("x")),
        "{\"a\":1,\"k\":\"x\"}"
    );
    assert_eq!(
        set_str("{\"a\": 1, \"b\": 2}", "k", &json!("x")),
        "{\"a\": 1, \"b\": 2, \"k\": \"x\"}"
    );
    assert_eq!(
        set_str("{\n\t\"a\": 1\n}\n", "k", &json!("x")),
        "{\n\t\"a\": 1,\n\t\"k\": \"x\"\n}\n"
    );
    assert_eq!(
        set_str("{\r\n    \"a\" : 1\r\n}", "k", &json!({"b": [1]})),
        "{\r\n    \"a\" : 1,\r\n    \"k\" : {\r\n        \"b\": [\r\n            1\r\n        ]\r\n    }\r\n}"
    );
}

#[test]
fn replacing_a_value_changes_only_the_value_bytes() {
    let doc = "{ \"a\" :1e3,\n \"k\"  :  \"accept\" , \"z\":1.0}";
    assert_eq!(
        set_str(doc, "k", &json!("refuse")),
        "{ \"a\" :1e3,\n \"k\"  :  \"refuse\" , \"z\":1.0}"
    );
}

#[test]
fn setting_an_equal_value_even_spelled_differently_changes_nothing() {
    assert_eq!(
        set_bytes(br#"{"k":"ho\u006cd"}"#, "k", &json!("hold")),
        Ok(None)
    );
}

#[test]
fn an_escaped_key_is_the_same_key() {
    assert_eq!(
        set_str(r#"{"\u006b": 1}"#, "k", &json!(2)),
        r#"{"\u006b": 2}"#
    );
}

#[test]
fn duplicate_keys_set_edits_the_last_and_remove_removes_all() {
    let doc = "{\"k\": 1, \"a\": 0, \"k\": 2}";
    assert_eq!(
        set_str(doc, "k", &json!(3)),
        "{\"k\": 1, \"a\": 0, \"k\": 3}"
    );
    assert_eq!(remove_str(doc, "k").unwrap(), "{\"a\": 0}");
    for (doc, without) in [
        ("{\"k\":1,\"k\":2}", "{}"),
        (
            "{\"k\":1,\"a\":0,\"k\":2,\"k\":3,\"b\":4,\"k\":5}",
            "{\"a\":0,\"b\":4}",
        ),
        (
            "{\n  \"k\": 1,\n  \"a\": 2,\n  \"k\": 3\n}\n",
            "{\n  \"a\": 2\n}\n",
        ),
        ("{\r\n\t\"k\": 1,\r\n\t\"k\": [2]\r\n}", "{}"),
    ] {
        assert_eq!(remove_str(doc, "k").unwrap(), without, "{doc:?}");
    }
}

#[test]
fn removing_a_middle_member_hands_its_indentation_to_the_next() {
    let doc = "{\n  \"a\": 1,\n  \"k\": [1, 2],\n  \"b\": 2\n}";
    assert_eq!(
        remove_str(doc, "k").unwrap(),
        "{\n  \"a\": 1,\n  \"b\": 2\n}"
    );
    assert_eq!(remove_str(doc, "absent"), None);
}

#[test]
fn invalid_documents_are_refused_with_what_they_are() {
    assert!(matches!(parse(b"{\"a\":}"), Err(DocError::InvalidJson(_))));
    assert!(matches!(parse(b"{} {}"), Err(DocError::InvalidJson(_))));
    assert_eq!(
        parse(b" [1]").unwrap_err(),
        DocError::NotAnObject("an array")
    );
    assert_eq!(parse(b"null").unwrap_err(), DocError::NotAnObject("null"));
    assert_eq!(
        parse(b"\"s\"").unwrap_err(),
        DocError::NotAnObject("a string")
    );
    assert_eq!(parse(b"3").unwrap_err(), DocError::NotAnObject("a number"));
}

#[test]
fn strings_with_escaped_quotes_backslashes_colons_and_brackets_keep_their_spans() {
    let doc = r#"{"a\\": "x\\", "b\":": "\\\"}", "c": ["]", "\"[", {"}": "\\"}], "k": "\\\\", "z": -1.5e3 }"#;
    let parsed = parse(doc.as_bytes()).unwrap();
    let keys: Vec<&str> = parsed.members.iter().map(|m| m.key.as_str()).collect();
    assert_eq!(keys, ["a\\", "b\":", "c", "k", "z"]);
    let oracle: Value = serde_json::from_str(doc).unwrap();
    for key in keys {
        assert_eq!(get(doc.as_bytes(), key).as_ref(), oracle.get(key), "{key}");
    }
    assert_eq!(
        String::from_utf8(set_bytes(doc.as_bytes(), "k", &json!(1)).unwrap().unwrap()).unwrap(),
        doc.replace(r#""k": "\\\\""#, r#""k": 1"#)
    );
}

#[test]
fn what_is_not_json_is_refused_with_serde_jsons_message() {
    for doc in [
        r#"{"a": [1,,2], "k": 1}"#,
        r#"{"a": tru, "k": 1}"#,
        r#"{"a": {"b" 1}, "k": 1}"#,
        r#"{"a": [}, "k": 1}"#,
        r#"{"a": "\x", "k": 1}"#,
        "{\"a\": \"\u{1}\", \"k\": 1}",
        r#"{"a": 01, "k": 1}"#,
        r#"{"a": 1,}"#,
        r#"{"a" 1}"#,
        "{\"a\": \"\u{e9}\"}\u{0}",
    ] {
        let err = parse(doc.as_bytes()).unwrap_err();
        assert!(
            matches!(&err, DocError::InvalidJson(m) if m.contains("line 1 column")),
            "{doc}: {err:?}"
        );
    }
    assert_eq!(
        parse(b"{\"a\": \"\xff\"}").unwrap_err(),
        DocError::InvalidJson("invalid UTF-8 at byte 7".to_owned())
    );
}

#[test]
fn deep_nesting_is_scanned_and_edited_without_overflowing_the_stack() {
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(parse(deep.as_bytes()).unwrap().members.len(), 1);
    let with = set_bytes(deep.as_bytes(), "k", &json!(1)).unwrap().unwrap();
    assert_eq!(remove_bytes(&with, "k").unwrap().unwrap(), deep.as_bytes());
}

/// A JSON value kept as text, so that number spellings and escapes survive.
#[derive(Debug, Clone)]
enum Node {
    Scalar(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

#[derive(Debug, Clone)]
struct Layout {
    indent: Option<&'static str>,
    newline: &'static str,
    colon: &'static str,
    trailing_newline: bool,
}

fn key_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z]{1,12}",
        "[a-z\u{e9}\u{4e2d}\u{1f600} ]{0,6}".prop_map(|s| serde_json::to_string(&s).unwrap()[1..]
            .trim_end_matches('"')
            .to_string()),
        Just(r"\u00e9t\u00e9".to_string()),
        Just(r#"with \"quote\" and \\ slash \/"#.to_string()),
        Just(r"\ud83d\ude00 emoji".to_string()),
    ]
}

fn scalar() -> impl Strategy<Value = Node> {
    prop_oneof![
        Just("1.0".to_string()),
        Just("1e3".to_string()),
        Just("-2.5E-7".to_string()),
        Just("12345678901234567890123".to_string()),
        Just("-0".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        key_text().prop_map(|s| format!("\"{s}\"")),
        Just(r#""line\nbreak\ttab \u0000""#.to_string()),
    ]
    .prop_map(Node::Scalar)
}

fn node() -> impl Strategy<Value = Node> {
    scalar().prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Node::Array),
            prop::collection::vec((key_text(), inner), 0..5).prop_map(Node::Object),
        ]
    })
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        prop_oneof![
            Just(None),
            Just(Some("  ")),
            Just(Some("    ")),
            Just(Some("\t"))
        ],
        prop_oneof![Just("\n"), Just("\r\n")],
        prop_oneof![Just(": "), Just(":"), Just(" : ")],
        any::<bool>(),
    )
        .prop_map(|(indent, newline, colon, trailing_newline)| Layout {
            indent,
            newline,
            colon,
            trailing_newline,
        })
}

fn render(node: &Node, layout: &Layout, depth: usize, out: &mut String) {
    let (open, close, items): (&str, &str, Vec<(Option<&String>, &Node)>) = match node {
        Node::Scalar(s) => {
            out.push_str(s);
            return;
        }
        Node::Array(a) => ("[", "]", a.iter().map(|n| (None, n)).collect()),
        Node::Object(o) => ("{", "}", o.iter().map(|(k, n)| (Some(k), n)).collect()),
    };
    out.push_str(open);
    for (i, (key, child)) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if let Some(unit) = layout.indent {
            out.push_str(layout.newline);
            out.push_str(&unit.repeat(depth + 1));
        }
        if let Some(k) = key {
            out.push('"');
            out.push_str(k);
            out.push('"');
            out.push_str(layout.colon);
        }
        render(child, layout, depth + 1, out);
    }
    if let (Some(unit), false) = (layout.indent, items.is_empty()) {
        out.push_str(layout.newline);
        out.push_str(&unit.repeat(depth));
    }
    out.push_str(close);
}

fn document() -> impl Strategy<Value = String> {
    (prop::collection::vec((key_text(), node()), 0..8), layout()).prop_map(|(members, layout)| {
        let members = members
            .into_iter()
            .filter(|(k, _)| {
                serde_json::from_str::<String>(&format!("\"{k}\"")).unwrap() != "target"
            })
            .collect();
        let mut out = String::new();
        render(&Node::Object(members), &layout, 0, &mut out);
        if layout.trailing_newline {
            out.push_str(layout.newline);
        }
        out
    })
}

fn new_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!("accept")),
        Just(json!("hold")),
        Just(json!("refuse")),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn set_then_read_gives_the_value_and_remove_gives_back_the_original_bytes(
        doc in document(),
        value in new_value(),
    ) {
        let before: Value = serde_json::from_str(&doc).unwrap();
        let with = set_bytes(doc.as_bytes(), "target", &value).unwrap().expect("the key was absent");
        prop_assert_eq!(get(&with, "target"), Some(value.clone()));
        let mut parsed: Value = serde_json::from_slice(&with).unwrap();
        prop_assert_eq!(parsed.as_object_mut().unwrap().remove("target"), Some(value.clone()));
        prop_assert_eq!(&parsed, &before, "every other member is unchanged");
        prop_assert_eq!(set_bytes(&with, "target", &value).unwrap(), None, "setting the same value again writes nothing");
        let back = remove_bytes(&with, "target").unwrap().expect("the key was present");
        prop_assert_eq!(String::from_utf8(back).unwrap(), doc);
    }
    #[test]
    fn the_member_table_is_what_serde_json_reads(doc in document(), value in new_value()) {
        let with = set_bytes(doc.as_bytes(), "target", &value).unwrap().unwrap();
        let oracle: Value = serde_json::from_slice(&with).unwrap();
        let parsed = parse(&with).unwrap();
        for m in &parsed.members {
            prop_assert!(with[m.lead_start..m.key_start].iter().all(|&b| is_ws(b)));
            let key: String = serde_json::from_slice(&with[m.key_start..m.key_end]).unwrap();
            prop_assert_eq!(&key, &m.key);
            let colon: Vec<u8> = with[m.key_end..m.value_start].iter().copied().filter(|&b| !is_ws(b)).collect();
            prop_assert_eq!(colon, b":");
            let value = get(&with, &m.key);
            prop_assert_eq!(value.as_ref(), oracle.get(&m.key));
        }
        let keys: std::collections::BTreeSet<&str> = parsed.members.iter().map(|m| m.key.as_str()).collect();
        let read: std::collections::BTreeSet<&str> = oracle.as_object().unwrap().keys().map(String::as_str).collect();
        prop_assert_eq!(keys, read);
    }

    #[test]
    fn removing_a_key_that_occurs_many_times_gives_the_document_written_without_it(
        members in prop::collection::vec((prop_oneof![key_text(), Just("target".to_string())], node()), 1..8),
        layout in layout(),
    ) {
        let render_doc = |members: Vec<(String, Node)>| {
            let mut out = String::new();
            render(&Node::Object(members), &layout, 0, &mut out);
            if layout.trailing_newline {
                out.push_str(layout.newline);
            }
            out
        };
        let doc = render_doc(members.clone());
        let kept: Vec<_> = members.into_iter().filter(|(k, _)| k != "target").collect();
        let removed = remove_bytes(doc.as_bytes(), "target").unwrap();
        let after = removed.map_or(doc, |bytes| String::from_utf8(bytes).unwrap());
        prop_assert_eq!(after, render_doc(kept));
    }
}
