//! Property tests of the env-var names: no panic on any text, the same result as a byte-for-byte
//! model of Stakater's `ConvertToEnvVarName`, and the hand-written table's answers kept when a
//! row's name is re-spelled in ways the conversion cannot see.

use proptest::prelude::*;

use super::tests::NAMES;
use super::*;

/// Stakater's loop, as written in Go: uppercase (one character to one; only `a-z`, dotless `ı`
/// and long `ſ` become ASCII), then walk the bytes, keeping `A-Z0-9` and writing one `_` after
/// each kept run that other bytes follow.
fn stakater_model(text: &str) -> String {
    let upper: String = text
        .chars()
        .map(|c| match c {
            'a'..='z' => c.to_ascii_uppercase(),
            '\u{131}' => 'I',
            '\u{17f}' => 'S',
            other => other,
        })
        .collect();
    let mut out = String::new();
    let mut last_kept = false;
    for byte in upper.bytes() {
        if byte.is_ascii_uppercase() || byte.is_ascii_digit() {
            out.push(byte as char);
            last_kept = true;
        } else {
            if last_kept {
                out.push('_');
            }
            last_kept = false;
        }
    }
    out
}

/// A run of characters that are never kept, of any script.
fn separators() -> impl Strategy<Value = String> {
    "[-._ /:@\u{e9}\u{df}\u{3bc}\u{fb01}\u{1f600}]{1,3}"
}

proptest! {
    #[test]
    fn any_text_converts_as_stakater_converts_it(text in any::<String>()) {
        prop_assert_eq!(convert_to_env_name(&text), stakater_model(&text));
    }

    #[test]
    fn object_names_convert_as_stakater_converts_them(text in "[a-zA-Z0-9.\\-_\u{131}\u{17f}\u{df}]{0,40}") {
        let converted = convert_to_env_name(&text);
        prop_assert_eq!(&converted, &stakater_model(&text));
        // Only A-Z, 0-9 and single underscores between kept runs (or one at the end).
        prop_assert!(converted.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        prop_assert!(!converted.starts_with('_') && !converted.contains("__"), "{}", converted);
        // Converting a converted name changes nothing.
        prop_assert_eq!(convert_to_env_name(&converted), converted.clone());
        let kind = ResourceKind::Secret;
        prop_assert_eq!(env_var_name(kind, &text), format!("STAKATER_{converted}_SECRET"));
    }

    /// A table row whose name has its letters' case changed and each run of separators replaced
    /// by another run still gives the table's answer.
    #[test]
    fn table_rows_keep_their_answer_when_respelled(
        row in prop::sample::select(NAMES),
        uppercase in prop::collection::vec(any::<bool>(), 64),
        runs in prop::collection::vec(separators(), 64),
    ) {
        let (kind, name, expected) = row;
        let mut respelled = String::new();
        let mut in_run = false;
        let mut run_index = 0;
        for (i, c) in name.chars().enumerate() {
            let kept = stakater_model(&c.to_string()).trim_end_matches('_').len() == 1;
            if !kept && c.is_ascii() {
                if !in_run {
                    respelled.push_str(&runs[run_index % runs.len()]);
                    run_index += 1;
                }
                in_run = true;
                continue;
            }
            in_run = false;
            if uppercase[i % uppercase.len()] && c.is_ascii_lowercase() {
                respelled.push(c.to_ascii_uppercase());
            } else {
                respelled.push(c);
            }
        }
        prop_assert_eq!(env_var_name(kind, &respelled), expected, "{} respelled {}", name, respelled);
    }
}
