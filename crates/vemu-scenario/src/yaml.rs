//! A YAML tree whose every node remembers where it was written, so that validation
//! errors can name file, line and column.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// 1-based line and column in the scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
}

impl Mark {
    fn from_span(span: &Span) -> Mark {
        Mark { line: span.start.line(), col: span.start.col() + 1 }
    }
}

#[derive(Debug, Clone)]
pub enum Value {
    /// A scalar as written, and whether it was quoted.
    Scalar(String, bool),
    Seq(Vec<Node>),
    /// Keys in file order, each with its own position.
    Map(Vec<(String, Mark, Node)>),
}

#[derive(Debug, Clone)]
pub struct Node {
    pub value: Value,
    pub mark: Mark,
}

impl Node {
    /// True for `~`, `null`, or an empty value.
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar(s, false) if matches!(s.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s, _) => Some(s),
            _ => None,
        }
    }

    /// A short word for what this node is, for messages.
    pub fn kind(&self) -> &'static str {
        match &self.value {
            _ if self.is_null() => "nothing",
            Value::Scalar(..) => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone)]
pub struct SyntaxError {
    pub mark: Mark,
    pub message: String,
}

enum Frame {
    Seq(Vec<Node>, Mark, usize),
    Map(Vec<(String, Mark, Node)>, Mark, usize, Option<(String, Mark)>),
}

/// YAML nodes that aliases may add to a document, in all: each alias is a copy of its
/// anchor's tree, so ten levels of ten aliases would copy 10¹⁰ nodes (an "alias bomb").
/// A scenario that needs more copies than this can say them out.
pub const MAX_ALIAS_NODES: usize = 1_000_000;

/// Nodes in a tree, itself included.
fn size(n: &Node) -> usize {
    1 + match &n.value {
        Value::Scalar(..) => 0,
        Value::Seq(items) => items.iter().map(size).sum(),
        Value::Map(items) => items.iter().map(|(_, _, v)| size(v)).sum(),
    }
}

/// Parse one YAML document into a marked tree. An empty document gives `None`.
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    // Each anchored tree with its size.
    let mut anchors: HashMap<usize, (Node, usize)> = HashMap::new();
    let mut copied = 0usize;
    let mut root: Option<Node> = None;
    let mut docs = 0;
    while let Some(ev) = parser.next_event() {
        let (ev, span) = ev.map_err(|e| SyntaxError {
            mark: Mark { line: e.marker().line(), col: e.marker().col() + 1 },
            message: e.info().to_string(),
        })?;
        let mark = Mark::from_span(&span);
        let done: Option<(Node, usize)> = match ev {
            Event::DocumentStart(_) => {
                docs += 1;
                if docs > 1 {
                    return Err(SyntaxError {
                        mark,
                        message: "a scenario holds one YAML document".into(),
                    });
                }
                None
            }
            Event::Scalar(s, style, anchor, _) => {
                let quoted = !matches!(style, ScalarStyle::Plain);
                Some((Node { value: Value::Scalar(s.into_owned(), quoted), mark }, anchor))
            }
            Event::Alias(id) => match anchors.get(&id) {
                Some((n, n_size)) => {
                    copied = copied.saturating_add(*n_size);
                    if copied > MAX_ALIAS_NODES {
                        return Err(SyntaxError {
                            mark,
                            message: format!("this alias makes the aliases of the file copy more than {MAX_ALIAS_NODES} YAML nodes in all (an alias bomb?); write the repeated parts out, or use fewer levels of aliases"),
                        });
                    }
                    Some((n.clone(), 0))
                }
                None => {
                    return Err(SyntaxError { mark, message: "alias to an unknown anchor".into() })
                }
            },
            Event::SequenceStart(anchor, _) => {
                stack.push(Frame::Seq(Vec::new(), mark, anchor));
                None
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Frame::Map(Vec::new(), mark, anchor, None));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(items, m, a)) => {
                    Some((Node { value: Value::Seq(items), mark: m }, a))
                }
                _ => unreachable!("parser emits balanced events"),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(items, m, a, _)) => {
                    Some((Node { value: Value::Map(items), mark: m }, a))
                }
                _ => unreachable!("parser emits balanced events"),
            },
            _ => None,
        };
        let Some((node, anchor)) = done else { continue };
        if anchor != 0 {
            anchors.insert(anchor, (node.clone(), size(&node)));
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq(items, ..)) => items.push(node),
            Some(Frame::Map(items, _, _, pending)) => match pending.take() {
                None => match node.value {
                    Value::Scalar(k, _) => *pending = Some((k, node.mark)),
                    _ => {
                        return Err(SyntaxError {
                            mark: node.mark,
                            message: "mapping keys must be plain words".into(),
                        })
                    }
                },
                Some((k, kmark)) => items.push((k, kmark, node)),
            },
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_one_based() {
        let n = parse("a: 1\nb:\n  - x\n  - {c: d}\n").unwrap().unwrap();
        let Value::Map(items) = &n.value else { panic!() };
        assert_eq!(items[1].1, Mark { line: 2, col: 1 });
        let Value::Seq(seq) = &items[1].2.value else { panic!() };
        assert_eq!(seq[1].mark, Mark { line: 4, col: 5 });
    }

    #[test]
    fn alias_bombs_are_refused_at_the_alias() {
        // Ten levels of ten aliases: 10^10 copies if expanded.
        let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            y += &format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n");
        }
        let e = parse(&y).unwrap_err();
        assert!(e.message.contains("alias bomb"), "{e:?}");
        assert!(e.mark.line >= 6 && e.mark.line <= 10, "{e:?}");
        // Ordinary use of aliases is fine.
        let n = parse("d: &d {delay: 5ms}\nl1: *d\nl2: *d\n").unwrap().unwrap();
        assert_eq!(size(&n), 7);
    }

    #[test]
    fn syntax_error_has_position() {
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.mark.line >= 1, "{e:?}");
    }

    #[test]
    fn anchors_and_aliases() {
        let n = parse("x: &d {delay: 5ms}\ny: *d\n").unwrap().unwrap();
        let Value::Map(items) = &n.value else { panic!() };
        assert!(matches!(items[1].2.value, Value::Map(_)));
    }
}
