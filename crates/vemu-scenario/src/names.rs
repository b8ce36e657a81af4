//! What names of labs, machines, nodes and media may be: they become parts of
//! namespace, device, directory and host names.

/// A name of 1-32 letters, digits, '-' or '_' whose first character passes `first`.
fn valid_name(
    kind: &str,
    name: &str,
    first: fn(&char) -> bool,
    first_desc: &str,
) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.chars().next().as_ref().is_some_and(first)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("{kind} name '{name}' must be 1-32 characters of letters, digits, '-' or '_', starting with {first_desc}"))
    }
}

/// Lab names become part of namespace and directory names.
pub fn valid_lab_name(name: &str) -> Result<(), String> {
    valid_name("lab", name, char::is_ascii_alphanumeric, "a letter or digit")
}

/// Machine names appear in `machine:` keys, status and logs.
pub(crate) fn valid_machine_name(name: &str) -> Result<(), String> {
    valid_name("machine", name, char::is_ascii_alphanumeric, "a letter or digit")
}

/// Node names are also host names.
pub fn valid_node_name(name: &str) -> Result<(), String> {
    valid_name("node", name, char::is_ascii_alphabetic, "a letter")
}

/// Segment and link names appear in CSV files, logs and `vemu link` specs.
pub(crate) fn valid_medium_name(kind: &str, name: &str) -> Result<(), String> {
    valid_name(kind, name, char::is_ascii_alphanumeric, "a letter or digit")
}
