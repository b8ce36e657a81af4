//! Scenario files for the web interface's editor: check one (the scenario loader that
//! `vemu check` uses), import a GraphML map as one (`vemu import`), and start a new lab
//! from one (`vemu up FILE --ui`, as its own controller). None of them touches this lab.

use std::path::PathBuf;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::requests::parse_body;
use super::{blocking, ApiError};

/// Where scenarios started from the editor are written (root only).
pub const SAVED_DIR: &str = "/var/lib/vemu/editor";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioBody {
    /// The scenario's text.
    yaml: String,
    /// The file name used in messages (default `scenario.yaml`).
    #[serde(default)]
    file: Option<String>,
}

/// A scenario's problems as the editor shows them: each with line, column and field.
fn problems(e: &vemu_scenario::Errors) -> Response {
    let list: Vec<_> = e
        .errors
        .iter()
        .map(|x| json!({"line": x.line, "col": x.col, "field": x.field, "message": x.message}))
        .collect();
    (StatusCode::UNPROCESSABLE_ENTITY, Json(json!({"error": e.to_string(), "errors": list})))
        .into_response()
}

/// The file name a body's scenario is checked under, and its stem (the default lab name).
fn file_of(b: &ScenarioBody) -> Result<(String, String), ApiError> {
    let file = b.file.clone().unwrap_or_else(|| "scenario.yaml".into());
    if file.is_empty()
        || file.len() > 255
        || file.contains('/')
        || file.chars().any(char::is_control)
    {
        return Err(ApiError::bad_request(format!("file: not a file name: {file:?}")));
    }
    let stem = file
        .strip_suffix(".yaml")
        .or_else(|| file.strip_suffix(".yml"))
        .unwrap_or(&file)
        .to_string();
    Ok((file, stem))
}

/// Check a scenario; `Ok(Err(response))` carries its problems.
async fn load(
    b: ScenarioBody,
) -> Result<Result<(vemu_scenario::Plan, String), Response>, ApiError> {
    let (file, stem) = file_of(&b)?;
    blocking(move || {
        Ok::<_, ApiError>(
            vemu_scenario::load_str(&b.yaml, &file, &stem, None)
                .map(|p| (p, b.yaml))
                .map_err(|e| problems(&e)),
        )
    })
    .await
}

/// `POST /v1/scenario/check` `{"yaml": "...", "file": "lab.yaml"}`: 200 with what the lab
/// would have, or 422 with `errors` (line, col, field, message) and `error` (all of them
/// as `vemu check` prints them).
pub(crate) async fn check(body: Bytes) -> Result<Response, ApiError> {
    Ok(match load(parse_body(&body)?).await? {
        Ok((plan, _)) => Json(summary(&plan)).into_response(),
        Err(r) => r,
    })
}

fn summary(plan: &vemu_scenario::Plan) -> serde_json::Value {
    json!({"valid": true, "name": plan.name, "nodes": plan.nodes.len(), "links": plan.links.len(), "segments": plan.segments.len(), "events": plan.events.len()})
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImportBody {
    /// A GraphML map (the Internet Topology Zoo's).
    #[serde(default)]
    graphml: Option<String>,
    /// A containerlab topology (`*.clab.yml`).
    #[serde(default)]
    clab: Option<String>,
    /// An IMUNES topology (`*.imn`, JSON or the older Tcl form).
    #[serde(default)]
    imunes: Option<String>,
    /// Its file name (messages, and the default lab name).
    #[serde(default)]
    file: Option<String>,
}

/// `POST /v1/scenario/import` `{"graphml" | "clab" | "imunes": "...", "file":
/// "Abilene.graphml"}`: the scenario `vemu import` makes of it, `{"yaml", "nodes",
/// "links", "warnings"}`. A containerlab topology's binds are left out (with a warning):
/// their files are on the machine of whoever sent it, not the API's.
pub(crate) async fn import(body: Bytes) -> Result<Json<serde_json::Value>, ApiError> {
    let b: ImportBody = parse_body(&body)?;
    let (text, format, default_file) = match (b.graphml, b.clab, b.imunes) {
        (Some(t), None, None) => (t, Format::Graphml, "topology.graphml"),
        (None, Some(t), None) => (t, Format::Clab, "topology.clab.yml"),
        (None, None, Some(t)) => (t, Format::Imunes, "topology.imn"),
        _ => {
            return Err(ApiError::bad_request(
                "give one topology: 'graphml', 'clab' (containerlab) or 'imunes'",
            ))
        }
    };
    let file = b.file.unwrap_or_else(|| default_file.into());
    let stem = std::path::Path::new(&file)
        .file_name()
        .and_then(|s| s.to_str())
        .and_then(|s| s.split('.').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("lab")
        .to_string();
    let imported = blocking(move || {
        use vemu_scenario::import;
        match format {
            Format::Graphml => import::graphml(&text, &file, &stem),
            Format::Clab => import::clab(&text, &file, None, None),
            Format::Imunes => import::imunes(&text, &file, &stem),
        }
        .map_err(ApiError::bad_request)
    })
    .await?;
    Ok(Json(
        json!({"yaml": imported.yaml, "nodes": imported.nodes, "links": imported.links, "warnings": imported.warnings}),
    ))
}

/// The topology formats `POST /v1/scenario/import` reads.
enum Format {
    Graphml,
    Clab,
    Imunes,
}

/// `POST /v1/scenario/up` `{"yaml": "..."}`: check the scenario, write it to
/// `/var/lib/vemu/editor/LAB.yaml` and start it as a lab of its own (`vemu up FILE
/// --ui`). 200 `{"lab", "file", "ui"}` (a login link of the new lab's page) once it
/// is up; 422 with the scenario's problems; 400 with `vemu up`'s message if it failed.
pub(crate) async fn up(body: Bytes) -> Result<Response, ApiError> {
    let (plan, text) = match load(parse_body(&body)?).await? {
        Ok(x) => x,
        Err(r) => return Ok(r),
    };
    let name = plan.name.clone();
    let file = PathBuf::from(SAVED_DIR).join(format!("{name}.yaml"));
    let internal = |e: String| ApiError::internal(e);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(SAVED_DIR)
            .map_err(|e| internal(format!("creating {SAVED_DIR}: {e}")))?;
    }
    crate::files::write_private(&file, text.as_bytes()).map_err(|e| internal(format!("{e:#}")))?;
    let exe =
        std::env::current_exe().map_err(|e| internal(format!("finding the vemu program: {e}")))?;
    let up_file = file.clone();
    // `vemu up` ends once the lab is up (its controller goes on in the background).
    let out = blocking(move || {
        std::process::Command::new(exe)
            .arg("up")
            .arg(&up_file)
            .arg("--ui")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| ApiError::internal(format!("running vemu up: {e}")))
    })
    .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(ApiError::bad_request(format!(
            "vemu up {} failed: {}",
            file.display(),
            stderr.trim()
        )));
    }
    let ui = stdout
        .lines()
        .find_map(|l| l.strip_prefix("web interface: "))
        .unwrap_or("")
        .trim()
        .to_string();
    Ok(Json(json!({"lab": name, "file": file, "ui": ui, "output": stderr.trim()})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(file: Option<&str>) -> ScenarioBody {
        ScenarioBody { yaml: String::new(), file: file.map(String::from) }
    }

    #[test]
    fn file_names_are_names() {
        assert_eq!(
            file_of(&body(None)).unwrap(),
            ("scenario.yaml".to_string(), "scenario".to_string())
        );
        assert_eq!(file_of(&body(Some("ring.yml"))).unwrap().1, "ring");
        for bad in ["", "../etc/passwd", "a\nb"] {
            let e = file_of(&body(Some(bad))).unwrap_err();
            assert!(e.message.starts_with("file: not a file name"), "{}", e.message);
        }
    }

    #[tokio::test]
    async fn a_bad_scenario_is_answered_with_each_problem_where_it_is() {
        let b = br#"{"yaml": "name: t\nnodes:\n  a: {}\nlinks:\n  - endpoints: [a, b]\n    delay: fast\n", "file": "t.yaml"}"#;
        let r = check(Bytes::from_static(b)).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let v: serde_json::Value =
            serde_json::from_slice(&axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap())
                .unwrap();
        let errors = v["errors"].as_array().unwrap();
        assert!(!errors.is_empty(), "{v}");
        assert!(
            errors.iter().all(|e| e["line"].as_u64().unwrap() >= 5
                && e["field"].as_str().unwrap().starts_with("links[0]")),
            "{v}"
        );
        assert!(v["error"].as_str().unwrap().starts_with("t.yaml:"), "{v}");
    }

    #[tokio::test]
    async fn a_good_scenario_is_summed_up() {
        let b =
            br#"{"yaml": "name: t\nnodes:\n  a: {}\n  b: {}\nlinks:\n  - endpoints: [a, b]\n"}"#;
        let r = check(Bytes::from_static(b)).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let v: serde_json::Value =
            serde_json::from_slice(&axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap())
                .unwrap();
        assert_eq!(
            v,
            json!({"valid": true, "name": "t", "nodes": 2, "links": 1, "segments": 0, "events": 0})
        );
    }

    #[tokio::test]
    async fn graphml_comes_back_as_a_scenario_or_an_error() {
        let g = r#"{"graphml": "<graphml><graph edgedefault=\"undirected\"><node id=\"a\"/><node id=\"b\"/><edge source=\"a\" target=\"b\"/></graph></graphml>", "file": "Tiny.graphml"}"#;
        let v = import(Bytes::from(g)).await.unwrap().0;
        assert_eq!((v["nodes"].as_u64(), v["links"].as_u64()), (Some(2), Some(1)), "{v}");
        let e = import(Bytes::from_static(br#"{"graphml": "<graphml"}"#)).await.unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with("topology.graphml: not GraphML"), "{}", e.message);
    }

    #[tokio::test]
    async fn containerlab_and_imunes_topologies_come_back_as_scenarios() {
        let c = json!({"clab": "name: t\ntopology:\n  nodes: {a: {binds: ['x.conf:/etc/x.conf']}, b: {}}\n  links:\n    - endpoints: ['a:eth1', 'b:eth1']\n", "file": "t.clab.yml"});
        let v = import(Bytes::from(c.to_string())).await.unwrap().0;
        assert_eq!((v["nodes"].as_u64(), v["links"].as_u64()), (Some(2), Some(1)), "{v}");
        // The binds' files are not the API's to read.
        assert!(!v["yaml"].as_str().unwrap().contains("x.conf"), "{v}");
        assert!(v["warnings"].to_string().contains("bind 'x.conf:/etc/x.conf' left out"), "{v}");
        let imn = json!({"imunes": "node n0 {\n    type pc\n    network-config {\n\thostname pc0\n\t!\n\tinterface eth0\n\t ip address 10.0.0.20/24\n\t!\n    }\n    interface-peer {eth0 n1}\n}\nnode n1 {\n    type pc\n    network-config {\n\thostname pc1\n\t!\n\tinterface eth0\n\t ip address 10.0.0.21/24\n\t!\n    }\n    interface-peer {eth0 n0}\n}\nlink l0 {\n    nodes {n0 n1}\n    bandwidth 0\n}\n", "file": "two.imn"});
        let v = import(Bytes::from(imn.to_string())).await.unwrap().0;
        assert_eq!((v["nodes"].as_u64(), v["links"].as_u64()), (Some(2), Some(1)), "{v}");
        assert!(v["yaml"].as_str().unwrap().contains("name: \"two\""), "{v}");
        for bad in [json!({}), json!({"graphml": "x", "clab": "y"})] {
            let e = import(Bytes::from(bad.to_string())).await.unwrap_err();
            assert!(e.message.contains("give one topology"), "{}", e.message);
        }
        let e = import(Bytes::from(json!({"clab": "name: t\n"}).to_string())).await.unwrap_err();
        assert!(e.message.starts_with("topology.clab.yml: no 'topology'"), "{}", e.message);
    }
}
