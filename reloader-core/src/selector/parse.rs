//! Lexer and recursive-descent parser for label selectors, following apimachinery's grammar,
//! with Stakater's legacy forms: `:` as `=`, and `*` as the value meaning "the key exists".

use std::collections::BTreeSet;

use super::names::{check_label_value, check_qualified_name};
use super::{Operator, Requirement};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Identifier(&'a str),
    /// The keywords `in` and `notin`; they read as plain values where a value is expected.
    In(&'a str),
    NotIn(&'a str),
    /// `=`, or the legacy `:`.
    Equals(&'a str),
    DoubleEquals,
    NotEquals,
    Bang,
    Open,
    Close,
    Comma,
    /// `<`, `>`: valid for the API server, but with no meaning for string labels here.
    Unsupported(&'a str),
    End,
}

impl Token<'_> {
    fn describe(self) -> String {
        match self {
            Token::Identifier(text) | Token::In(text) | Token::NotIn(text) => format!("{text:?}"),
            Token::Equals(op) | Token::Unsupported(op) => format!("{op:?}"),
            Token::DoubleEquals => "\"==\"".into(),
            Token::NotEquals => "\"!=\"".into(),
            Token::Bang => "\"!\"".into(),
            Token::Open => "\"(\"".into(),
            Token::Close => "\")\"".into(),
            Token::Comma => "\",\"".into(),
            Token::End => "the end".into(),
        }
    }
}

fn is_special(c: char) -> bool {
    c.is_whitespace() || matches!(c, '!' | '=' | ':' | '(' | ')' | ',' | '<' | '>')
}

fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while let Some(c) = rest.chars().next() {
        let (token, len) = match c {
            '!' if rest.starts_with("!=") => (Token::NotEquals, 2),
            '!' => (Token::Bang, 1),
            '=' if rest.starts_with("==") => (Token::DoubleEquals, 2),
            '=' | ':' => (Token::Equals(&rest[..1]), 1),
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            ',' => (Token::Comma, 1),
            '<' | '>' => (Token::Unsupported(&rest[..1]), 1),
            _ => {
                let len = rest.find(is_special).unwrap_or(rest.len());
                let word = &rest[..len];
                let token = match word {
                    "in" => Token::In(word),
                    "notin" => Token::NotIn(word),
                    _ => Token::Identifier(word),
                };
                (token, len)
            }
        };
        tokens.push(token);
        rest = rest[len..].trim_start();
    }
    tokens.push(Token::End);
    tokens
}

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    position: usize,
}

/// Parses a whole selector; the empty text is the empty selector (it selects everything).
pub(super) fn parse_requirements(text: &str) -> Result<Vec<Requirement>, String> {
    let mut parser = Parser { tokens: tokenize(text), position: 0 };
    let mut requirements = Vec::new();
    if parser.peek() == Token::End {
        return Ok(requirements);
    }
    loop {
        requirements.push(parser.requirement()?);
        match parser.next() {
            Token::End => return Ok(requirements),
            Token::Comma => {}
            other => return Err(format!("expected \",\" or the end, found {}", other.describe())),
        }
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens[self.position]
    }

    fn next(&mut self) -> Token<'a> {
        let token = self.peek();
        if token != Token::End {
            self.position += 1;
        }
        token
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        match self.next() {
            Token::Bang => {
                let key = self.key()?;
                Ok(Requirement::new(key, Operator::DoesNotExist, BTreeSet::new()))
            }
            Token::Identifier(key) => {
                let key = checked_key(key)?;
                self.after_key(key)
            }
            other => Err(format!("expected a label key or \"!\", found {}", other.describe())),
        }
    }

    fn key(&mut self) -> Result<String, String> {
        match self.next() {
            Token::Identifier(key) => checked_key(key),
            other => Err(format!("expected a label key, found {}", other.describe())),
        }
    }

    fn after_key(&mut self, key: String) -> Result<Requirement, String> {
        let operator = match self.peek() {
            Token::End | Token::Comma => {
                return Ok(Requirement::new(key, Operator::Exists, BTreeSet::new()));
            }
            Token::Equals(_) | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::In(_) => Operator::In,
            Token::NotIn(_) => Operator::NotIn,
            Token::Unsupported(op) => {
                return Err(format!("operator {op:?} is not supported (use =, ==, !=, in or notin)"));
            }
            other => return Err(format!("expected an operator after {key:?}, found {}", other.describe())),
        };
        self.next();
        match operator {
            Operator::Equals | Operator::NotEquals => {
                let value = self.exact_value();
                if value == "*" {
                    if operator == Operator::Equals {
                        return Ok(Requirement::new(key, Operator::Exists, BTreeSet::new()));
                    }
                    return Err(format!("\"*\" is only accepted as {key}=* or {key}:* (the key exists)"));
                }
                Ok(Requirement::new(key, operator, BTreeSet::from([checked_value(value)?])))
            }
            _ => {
                let values = self.value_list()?;
                Ok(Requirement::new(key, operator, values))
            }
        }
    }

    /// The value after `=`/`!=`: missing means the empty value, as in apimachinery.
    fn exact_value(&mut self) -> &'a str {
        match value_text(self.peek()) {
            Some(value) => {
                self.next();
                value
            }
            None => "",
        }
    }

    /// `( v1, v2, ... )`; `()` is the set holding the empty value, as in apimachinery.
    fn value_list(&mut self) -> Result<BTreeSet<String>, String> {
        match self.next() {
            Token::Open => {}
            other => return Err(format!("expected \"(\", found {}", other.describe())),
        }
        let mut values = BTreeSet::new();
        if self.peek() == Token::Close {
            self.next();
            values.insert(String::new());
            return Ok(values);
        }
        loop {
            let token = self.next();
            let value = value_text(token)
                .ok_or_else(|| format!("expected a label value, found {}", token.describe()))?;
            values.insert(checked_value(value)?);
            match self.next() {
                Token::Comma => {}
                Token::Close => return Ok(values),
                other => return Err(format!("expected \",\" or \")\", found {}", other.describe())),
            }
        }
    }
}

/// In value position the keywords are ordinary text (`tier=in` is valid).
fn value_text(token: Token<'_>) -> Option<&str> {
    match token {
        Token::Identifier(text) | Token::In(text) | Token::NotIn(text) => Some(text),
        _ => None,
    }
}

fn checked_key(key: &str) -> Result<String, String> {
    check_qualified_name(key).map_err(|why| format!("{key:?} is not a valid label key: {why}"))?;
    Ok(key.to_owned())
}

fn checked_value(value: &str) -> Result<String, String> {
    check_label_value(value).map_err(|why| format!("{value:?} is not a valid label value: {why}"))?;
    Ok(value.to_owned())
}
