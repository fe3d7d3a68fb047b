//! `metav1.Status` error responses with the real server's reasons and wording,
//! so that clients' error classification (kube-rs `Error::Api`, kubectl's
//! `Error from server (NotFound): ...`) behaves as against a real cluster.

use serde_json::{json, Map, Value};

use crate::resources::ResourceType;

/// An API failure, rendered as a `Status` body with the matching HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// List metadata, used by 410 Expired to hand out a fresh continue token.
    pub metadata: Value,
    pub retry_after_secs: Option<u64>,
}

/// `Status.details` naming an object the way the real server does: `kind`
/// holds the plural resource, `group` is omitted for core.
pub fn details(rt: &ResourceType, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": rt.resource});
    if !rt.group.is_empty() {
        d["group"] = json!(rt.group);
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            metadata: json!({}),
            retry_after_secs: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", rt.qualified()),
        )
        .with_details(details(rt, name))
    }

    /// The 404 for URLs that name no API at all.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", rt.qualified()),
        )
        .with_details(details(rt, name))
    }

    /// A 409 Conflict for a failed precondition or stale resourceVersion.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                rt.qualified()
            ),
        )
        .with_details(details(rt, name))
    }

    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// A 422 for a field that fails validation, shaped like the real
    /// `<Kind> "<name>" is invalid: <field>: <detail>` errors.
    pub fn invalid(kind: &str, group: &str, name: &str, field: &str, detail: &str) -> Self {
        let mut d = json!({
            "name": name,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}],
        });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        Self::new(
            422,
            "Invalid",
            format!("{kind} {name:?} is invalid: {field}: {detail}"),
        )
        .with_details(d)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json",
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            ),
        )
    }

    pub fn internal(message: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 410 for a continue token past compaction. `fresh_continue` lets the
    /// client carry on with an inconsistent list, as the real server offers.
    pub fn expired_continue(fresh_continue: Option<String>) -> Self {
        let mut e = Self::new(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may \
             show up in the list.",
        );
        if let Some(token) = fresh_continue {
            e.metadata = json!({"continue": token});
        }
        e
    }

    pub fn too_many_requests(retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({"retryAfterSeconds": retry_after_secs}));
        e.retry_after_secs = Some(retry_after_secs);
        e
    }

    /// A failure with a given HTTP code and the reason the real server pairs
    /// with it, for injected faults.
    pub fn for_code(code: u16) -> Self {
        let (reason, message) = match code {
            400 => ("BadRequest", "bad request (injected fault)"),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden (injected fault)"),
            404 => ("NotFound", "the server could not find the requested resource"),
            405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
            409 => ("Conflict", "conflict (injected fault)"),
            410 => ("Gone", "gone (injected fault)"),
            422 => ("Invalid", "invalid (injected fault)"),
            429 => return Self::too_many_requests(1),
            500 => return Self::internal("injected fault"),
            503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
            504 => ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request"),
            _ => ("", "injected fault"),
        };
        Self::new(code, reason, message)
    }

    /// The RBAC denial the real authorizer returns, e.g.
    /// `serviceaccounts "x" is forbidden: User "u" cannot delete resource
    /// "serviceaccounts" in API group "" in the namespace "ns"`.
    pub fn forbidden(
        user: &str,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let subject = match name {
            Some(n) => format!("{qualified} {n:?}"),
            None => qualified,
        };
        let scope = match namespace {
            Some(ns) => format!("in the namespace {ns:?}"),
            None => "at the cluster scope".to_string(),
        };
        let mut d = json!({"kind": resource});
        if let Some(n) = name {
            d["name"] = json!(n);
        }
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        Self::new(
            403,
            "Forbidden",
            format!(
                "{subject} is forbidden: User {user:?} cannot {verb} resource {resource:?} in API group {group:?} {scope}"
            ),
        )
        .with_details(d)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), self.metadata.clone());
        status.insert("status".into(), json!("Failure"));
        status.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            status.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            status.insert("details".into(), d.clone());
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }
}

/// The `Status` the real server answers a completed delete with (for types
/// that do not return the deleted object).
pub fn delete_success(rt: &ResourceType, name: &str, uid: &str) -> Value {
    let mut d = details(rt, name);
    d["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": d,
    })
}
