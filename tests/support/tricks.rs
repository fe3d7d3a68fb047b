//! Ways a manifest can hide a worker account from a reader that is not kubectl's:
//! look-alike keys and decoding tricks, as lines of a pod spec (name, lines). Run by
//! tests/hostile.rs against kubectl's own decoder and by tests/faces.rs on every face.

pub const DECODING_TRICKS: &[(&str, &str)] = &[
    (
        "trailing space",
        "  \"serviceAccountName \": nvcf-worker-x\n",
    ),
    (
        "leading space",
        "  \" serviceAccountName\": nvcf-worker-x\n",
    ),
    ("tab inside", "  \"service\\tAccountName\": nvcf-worker-x\n"),
    ("Cyrillic small a", "  serviceAccountNаme: nvcf-worker-x\n"),
    (
        "Cyrillic capital A",
        "  serviceАccountName: nvcf-worker-x\n",
    ),
    (
        "Cyrillic o, e and c",
        "  sеrviсeAccоuntName: nvcf-worker-x\n",
    ),
    (
        "Greek capital Alpha",
        "  serviceΑccountName: nvcf-worker-x\n",
    ),
    ("Greek omicron", "  serviceAccοuntName: nvcf-worker-x\n"),
    ("Greek capital Nu", "  serviceAccountΝame: nvcf-worker-x\n"),
    (
        "zero-width space",
        "  \"service\\u200bAccountName\": nvcf-worker-x\n",
    ),
    (
        "zero-width joiner raw",
        "  service\u{200d}AccountName: nvcf-worker-x\n",
    ),
    ("soft hyphen", "  service\u{ad}AccountName: nvcf-worker-x\n"),
    (
        "BOM inside",
        "  \"serviceAccount\\uFEFFName\": nvcf-worker-x\n",
    ),
    ("fullwidth", "  ｓｅｒｖｉｃｅAccountName: nvcf-worker-x\n"),
    ("other case", "  ServiceAccountName: nvcf-worker-x\n"),
    ("lower case", "  serviceaccountname: nvcf-worker-x\n"),
    (
        "deprecated key look-alike",
        "  serviceАccount: nvcf-worker-x\n",
    ),
    (
        "escaped key",
        "  \"service\\x41ccountName\": nvcf-worker-x\n",
    ),
    (
        "unicode-escaped key",
        "  \"\\u0073erviceAccountName\": nvcf-worker-x\n",
    ),
    (
        "escaped value",
        "  serviceAccountName: \"nvcf\\x2dworker-x\"\n",
    ),
    (
        "single-quoted value",
        "  serviceAccountName: 'nvcf-worker-x'\n",
    ),
    (
        "tagged value",
        "  serviceAccountName: !!str nvcf-worker-x\n",
    ),
    (
        "literal block value",
        "  serviceAccountName: |-\n    nvcf-worker-x\n",
    ),
    (
        "folded block value",
        "  serviceAccountName: >-\n    nvcf-worker-x\n",
    ),
    (
        "value with spaces",
        "  serviceAccountName: \" nvcf-worker-x \"\n",
    ),
    ("deprecated key", "  serviceAccount: nvcf-worker-x\n"),
    (
        "alias value",
        "  x-name: &n nvcf-worker-x\n  serviceAccountName: *n\n",
    ),
    (
        "alias key",
        "  x-key: &k serviceAccountName\n  *k : nvcf-worker-x\n",
    ),
    ("merge key", "  <<: {serviceAccountName: nvcf-worker-x}\n"),
    (
        "merge list",
        "  <<: [{x: 1}, {serviceAccount: nvcf-worker-x}]\n",
    ),
    (
        "duplicate key",
        "  serviceAccountName: default\n  serviceAccountName: nvcf-worker-x\n",
    ),
    (
        "explicit key",
        "  ? serviceAccountName\n  : nvcf-worker-x\n",
    ),
    (
        "hidden in an extra field",
        "  x-extra: {containers: [{name: c}], serviceAccountName: nvcf-worker-x}\n",
    ),
    (
        "hidden in a list",
        "  x-extra: [[{serviceAccountName: nvcf-worker-x}]]\n",
    ),
];

/// A Pod `p` (no namespace) whose spec ends with `spec_lines`; `selected` labels it for inject.
pub fn pod_with(spec_lines: &str, selected: bool) -> String {
    let labels = if selected {
        "\n  labels: {nvcf.io/worker: \"true\"}"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{labels}\nspec:\n  containers: [{{name: c, image: i}}]\n{spec_lines}"
    )
}
