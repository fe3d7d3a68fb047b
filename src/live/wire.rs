//! The Kubernetes protobuf encoding, as far as the re-check reads it: a page of
//! pods (name, account, phase and the continue token) and a failure's message.
//! A JSON pod costs the API server several times its protobuf encoding, and the
//! re-check lists every pod of a namespace once per batch, so it asks for
//! protobuf (as client-go does for built-in types) and walks the bytes here,
//! skipping every other field unread. No schema crate: the field numbers are
//! k8s.io/api's `core/v1/generated.proto` and apimachinery's, as of v0.36.3.
//!
//! A body is the 4-byte magic `k8s\0`, then a `runtime.Unknown` whose `raw`
//! (field 2) holds the object: here a `PodList` or a `Status`.

use serde::Deserialize;

/// What the API server's protobuf bodies start with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Protobuf first, JSON if the server cannot (it answers JSON then).
pub const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// One field's value on the wire; fixed-width numbers are skipped, not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one message, in wire order: `(number, value)`, or an error
/// naming the byte where the message stops making sense.
pub struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

pub fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, at: 0 }
}

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.buf.get(self.at) else {
                return Err(format!("truncated varint at byte {}", self.at));
            };
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("varint longer than 10 bytes at byte {}", self.at))
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let start = self.at;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| start.checked_add(n))
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| format!("field of {n} bytes at byte {start} runs past the end"))?;
        self.at = end;
        Ok(&self.buf[start..end])
    }

    fn field(&mut self) -> Result<(u64, Value<'a>), String> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.take(8).map(|_| Value::Fixed)?,
            2 => {
                let n = self.varint()?;
                Value::Bytes(self.take(n)?)
            }
            5 => self.take(4).map(|_| Value::Fixed)?,
            wire => return Err(format!("wire type {wire} at byte {}", self.at)),
        };
        Ok((key >> 3, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.at = self.buf.len();
        }
        Some(field)
    }
}

/// Each length-delimited field `number` of `buf` (a nested message or a
/// string), in order; any other field is skipped.
fn each<'a>(
    buf: &'a [u8],
    number: u64,
    mut f: impl FnMut(&'a [u8]) -> Result<(), String>,
) -> Result<(), String> {
    for field in fields(buf) {
        match field? {
            (n, Value::Bytes(bytes)) if n == number => f(bytes)?,
            (n, Value::Varint(_) | Value::Fixed) if n == number => {
                return Err(format!("field {number} is not length-delimited"))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The last field `number` of `buf` as text (protobuf's rule: the last wins).
fn text(buf: &[u8], number: u64) -> Result<Option<String>, String> {
    let mut found = None;
    each(buf, number, |bytes| {
        found = Some(bytes);
        Ok(())
    })?;
    found
        .map(|b| String::from_utf8(b.to_vec()).map_err(|_| format!("field {number} is not UTF-8")))
        .transpose()
}

/// The last nested message `number` of `buf`, or empty (all fields unset).
fn message(buf: &[u8], number: u64) -> Result<&[u8], String> {
    let mut found: &[u8] = &[];
    each(buf, number, |bytes| {
        found = bytes;
        Ok(())
    })?;
    Ok(found)
}

/// The object inside a protobuf body, or None when the body is not protobuf
/// (JSON: the server could not, or a proxy answered).
pub fn envelope(body: &[u8]) -> Option<Result<&[u8], String>> {
    let unknown = body.strip_prefix(MAGIC)?;
    Some(
        text(unknown, 3) // contentEncoding: none is ever set for an API object
            .and_then(|encoding| match encoding.as_deref() {
                None | Some("") => message(unknown, 2),
                Some(other) => Err(format!("content encoding {other:?}")),
            }),
    )
}

/// A pod as the re-check reads it, from protobuf or JSON alike.
#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    #[serde(default)]
    pub metadata: PodMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq)]
pub struct PodMeta {
    #[serde(default)]
    pub name: String,
}

#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub service_account_name: Option<String>,
    #[serde(default)]
    pub service_account: Option<String>,
}

#[derive(Deserialize, Default, Debug, Clone, PartialEq, Eq)]
pub struct PodStatus {
    #[serde(default)]
    pub phase: Option<String>,
}

/// `Pod`: metadata 1 (`ObjectMeta.name` 1), spec 2 (`PodSpec.serviceAccountName`
/// 8, `serviceAccount` 9), status 3 (`PodStatus.phase` 1).
fn pod(buf: &[u8]) -> Result<Pod, String> {
    let (meta, spec, status) = (message(buf, 1)?, message(buf, 2)?, message(buf, 3)?);
    Ok(Pod {
        metadata: PodMeta {
            name: text(meta, 1)?.unwrap_or_default(),
        },
        spec: PodSpec {
            service_account_name: text(spec, 8)?,
            service_account: text(spec, 9)?,
        },
        status: PodStatus {
            phase: text(status, 1)?,
        },
    })
}

/// A `PodList` page: its pods (items, field 2) and the continue token
/// (`ListMeta`, field 1; its `continue`, field 3), empty when it is the last.
pub fn pod_list(raw: &[u8]) -> Result<(Vec<Pod>, Option<String>), String> {
    let mut pods = Vec::new();
    each(raw, 2, |item| {
        pods.push(pod(item).map_err(|e| format!("pod {}: {e}", pods.len()))?);
        Ok(())
    })?;
    let token = text(message(raw, 1)?, 3)?.filter(|t| !t.is_empty());
    Ok((pods, token))
}

/// A protobuf `Status`'s message (field 3), for a failure's text.
pub fn status_message(body: &[u8]) -> Option<String> {
    let status = envelope(body)?.ok()?;
    text(status, 3).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A test-side encoder: a varint, a length-delimited field, a varint field.
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes(number: u64, value: &[u8], out: &mut Vec<u8>) {
        varint(number << 3 | 2, out);
        varint(value.len() as u64, out);
        out.extend_from_slice(value);
    }

    /// Fields the decoder must skip: a varint, fixed64, fixed32 and a nested
    /// message, numbered around the ones it reads.
    fn noise(seed: u8, out: &mut Vec<u8>) {
        varint(21 << 3, out);
        varint(u64::from(seed) << 40, out);
        varint(4 << 3 | 1, out);
        out.extend_from_slice(&[seed; 8]);
        varint(17 << 3 | 5, out);
        out.extend_from_slice(&[seed; 4]);
        bytes(7, &vec![seed; usize::from(seed)], out);
    }

    fn encode_pod(p: &Pod, seed: u8) -> Vec<u8> {
        let (mut meta, mut spec, mut status, mut pod) = (vec![], vec![], vec![], vec![]);
        noise(seed, &mut meta);
        bytes(1, p.metadata.name.as_bytes(), &mut meta);
        bytes(3, b"namespace", &mut meta);
        noise(seed, &mut spec);
        if let Some(a) = &p.spec.service_account_name {
            bytes(8, a.as_bytes(), &mut spec);
        }
        if let Some(a) = &p.spec.service_account {
            bytes(9, a.as_bytes(), &mut spec);
        }
        if let Some(phase) = &p.status.phase {
            bytes(1, phase.as_bytes(), &mut status);
        }
        noise(seed, &mut status);
        // Status before spec: the decoder goes by number, not order.
        bytes(1, &meta, &mut pod);
        bytes(3, &status, &mut pod);
        bytes(2, &spec, &mut pod);
        pod
    }

    fn encode_list(pods: &[(Pod, u8)], token: &str) -> Vec<u8> {
        let (mut list_meta, mut list) = (vec![], vec![]);
        bytes(2, b"12345", &mut list_meta);
        bytes(3, token.as_bytes(), &mut list_meta);
        bytes(1, &list_meta, &mut list);
        for (p, seed) in pods {
            bytes(2, &encode_pod(p, *seed), &mut list);
        }
        let mut unknown = vec![];
        bytes(1, b"\x0a\x02v1\x12\x07PodList", &mut unknown);
        bytes(2, &list, &mut unknown);
        bytes(4, b"application/vnd.kubernetes.protobuf", &mut unknown);
        [MAGIC.as_slice(), &unknown].concat()
    }

    fn text_of() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-z0-9-]{0,40}|.{0,3}")
    }

    fn pods() -> impl Strategy<Value = Vec<(Pod, u8)>> {
        let pod = (
            "[a-z0-9-]{1,60}",
            text_of(),
            text_of(),
            text_of(),
            any::<u8>(),
        )
            .prop_map(|(name, sa_name, sa, phase, seed)| {
                let pod = Pod {
                    metadata: PodMeta { name },
                    spec: PodSpec {
                        service_account_name: sa_name,
                        service_account: sa,
                    },
                    status: PodStatus { phase },
                };
                (pod, seed)
            });
        proptest::collection::vec(pod, 0..40)
    }

    proptest! {
        #[test]
        fn a_pod_list_decodes_to_what_was_encoded(pods in pods(), token in "[A-Za-z0-9=]{0,80}") {
            let body = encode_list(&pods, &token);
            let raw = envelope(&body).expect("protobuf").unwrap();
            let (decoded, next) = pod_list(raw).unwrap();
            let expected: Vec<Pod> = pods.into_iter().map(|(p, _)| p).collect();
            prop_assert_eq!(decoded, expected);
            prop_assert_eq!(next, Some(token).filter(|t| !t.is_empty()));
        }

        #[test]
        fn a_cut_or_damaged_body_is_an_error_never_a_panic(
            pods in pods(), cut in any::<prop::sample::Index>(), flip in any::<(prop::sample::Index, u8)>()
        ) {
            let body = encode_list(&pods, "t");
            let cut = &body[..cut.index(body.len())];
            if let Some(Ok(raw)) = envelope(cut) {
                let _ = pod_list(raw);
            }
            let mut damaged = body.clone();
            let at = flip.0.index(damaged.len());
            damaged[at] ^= flip.1 | 1;
            if let Some(Ok(raw)) = envelope(&damaged) {
                let _ = pod_list(raw);
            }
        }
    }

    #[test]
    fn a_body_cut_inside_a_field_names_where() {
        let body = encode_list(&[(Pod::default(), 3)], "");
        let raw = envelope(&body).unwrap().unwrap();
        let err = pod_list(&raw[..raw.len() - 2]).unwrap_err();
        assert!(err.contains("runs past the end"), "{err}");
        assert!(envelope(b"{\"kind\":\"PodList\"}").is_none());
    }

    #[test]
    fn a_protobuf_status_gives_its_message() {
        let mut status = vec![];
        bytes(2, b"Failure", &mut status);
        bytes(3, b"pods is forbidden: User \"x\" cannot list", &mut status);
        varint(6 << 3, &mut status);
        varint(403, &mut status);
        let mut unknown = vec![];
        bytes(2, &status, &mut unknown);
        let body = [MAGIC.as_slice(), &unknown].concat();
        assert_eq!(
            status_message(&body).as_deref(),
            Some("pods is forbidden: User \"x\" cannot list")
        );
    }
}
