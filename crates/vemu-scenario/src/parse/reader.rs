//! Reading the marked YAML tree: mappings, lists, scalars, each error at its mark
//! and field ([`P`]).

use super::*;

pub(crate) struct P {
    pub(crate) errors: Vec<Error>,
    /// Whose scenario it is: what reaches beyond its nodes is refused to a tenant.
    pub(crate) trust: crate::Trust,
    /// The directory files named in the scenario are relative to; `None` where no file
    /// may be named (impairments given at run time).
    pub(crate) base: Option<std::path::PathBuf>,
    /// Links' impairments made lately, shared by the links that have the same (a
    /// generated lab's links of one tier: one copy, not one per link and direction).
    pub(crate) shared: Vec<std::sync::Arc<vemu_link::Impairments>>,
}

pub(crate) type Entries<'n> = Vec<(&'n str, Mark, &'n Node)>;

impl P {
    pub(crate) fn new(trust: crate::Trust, base: Option<std::path::PathBuf>) -> P {
        P { errors: Vec::new(), trust, base, shared: Vec::new() }
    }

    /// `imp`, as one of the copies made lately if it equals one.
    pub(crate) fn share(
        &mut self,
        imp: vemu_link::Impairments,
    ) -> std::sync::Arc<vemu_link::Impairments> {
        const KEPT: usize = 8;
        if let Some(i) = self.shared.iter().position(|s| **s == imp) {
            return self.shared[i].clone();
        }
        let a = std::sync::Arc::new(imp);
        if self.shared.len() == KEPT {
            self.shared.remove(0);
        }
        self.shared.push(a.clone());
        a
    }

    pub(crate) fn err(&mut self, mark: Mark, field: &str, message: impl Into<String>) {
        self.errors.push(Error {
            line: mark.line,
            col: mark.col,
            field: field.to_string(),
            message: message.into(),
        });
    }

    /// Whether the scenario may use `r` (at `field`); when it may not, says so there.
    pub(crate) fn reach(&mut self, r: crate::Reach, mark: Mark, field: &str) -> bool {
        match self.trust.refusal(r) {
            None => true,
            Some(why) => {
                self.err(mark, field, why);
                false
            }
        }
    }

    /// The entries of a mapping (null counts as empty), reporting unknown and repeated keys.
    pub(crate) fn map<'n>(&mut self, node: &'n Node, field: &str, allowed: &[&str]) -> Entries<'n> {
        if node.is_null() {
            return Vec::new();
        }
        let Value::Map(items) = &node.value else {
            self.err(node.mark, field, format!("expected a mapping, found {}", node.kind()));
            return Vec::new();
        };
        let mut seen: HashMap<&str, Mark> = HashMap::new();
        let mut out = Vec::new();
        for (k, kmark, v) in items {
            let sub = join(field, k);
            if !allowed.is_empty() && !allowed.contains(&k.as_str()) {
                self.err(
                    *kmark,
                    &sub,
                    format!("unknown field '{k}', expected one of: {}", allowed.join(", ")),
                );
                continue;
            }
            if let Some(first) = seen.insert(k, *kmark) {
                self.err(
                    *kmark,
                    &sub,
                    format!("'{k}' is given twice (first on line {})", first.line),
                );
                continue;
            }
            out.push((k.as_str(), *kmark, v));
        }
        out
    }

    pub(crate) fn seq<'n>(&mut self, node: &'n Node, field: &str) -> &'n [Node] {
        match &node.value {
            _ if node.is_null() => &[],
            Value::Seq(items) => items,
            _ => {
                self.err(node.mark, field, format!("expected a list, found {}", node.kind()));
                &[]
            }
        }
    }

    pub(crate) fn string(&mut self, node: &Node, field: &str) -> Option<String> {
        match &node.value {
            Value::Scalar(s, _) if !node.is_null() => Some(s.clone()),
            _ => {
                self.err(node.mark, field, format!("expected a text value, found {}", node.kind()));
                None
            }
        }
    }

    /// Parse a scalar with `f`, reporting its message at the node.
    /// A yes/no field: true, on, yes / false, off, no.
    pub(crate) fn boolean(&mut self, node: &Node, field: &str) -> Option<bool> {
        self.scalar(node, field, |s| match s {
            "true" | "on" | "yes" => Ok(true),
            "false" | "off" | "no" => Ok(false),
            _ => Err(format!("expected true or false, got '{s}'")),
        })
    }

    pub(crate) fn scalar<T>(
        &mut self,
        node: &Node,
        field: &str,
        f: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let s = self.string(node, field)?;
        match f(&s) {
            Ok(v) => Some(v),
            Err(m) => {
                self.err(node.mark, field, m);
                None
            }
        }
    }

    /// One string or a list of strings.
    pub(crate) fn strings(&mut self, node: &Node, field: &str) -> Vec<String> {
        match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, n)| self.string(n, &format!("{field}[{i}]")))
                .collect(),
            _ if node.is_null() => Vec::new(),
            _ => self.string(node, field).into_iter().collect(),
        }
    }
}

pub(crate) fn join(field: &str, key: &str) -> String {
    if field.is_empty() {
        key.to_string()
    } else {
        format!("{field}.{key}")
    }
}

pub(crate) fn integer<T: std::str::FromStr>(
    what: &'static str,
) -> impl Fn(&str) -> Result<T, String> {
    move |s: &str| s.trim().parse::<T>().map_err(|_| format!("expected {what}, got '{s}'"))
}
