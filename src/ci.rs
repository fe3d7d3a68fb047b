//! `validate`'s findings as CI systems read them without code scanning: JUnit XML
//! (GitLab, Jenkins, Azure DevOps) and GitHub Actions workflow annotations.

use crate::report::{Finding, Severity};

/// Whether a finding fails the check: errors always, warnings with `--fail-on-warn`.
pub fn fails(f: &Finding, fail_on_warn: bool) -> bool {
    f.severity == Severity::Error || (fail_on_warn && f.severity == Severity::Warning)
}

/// Text as XML 1.0 character data or an attribute value: markup escaped, line
/// breaks and tabs kept as references (attributes would fold them), and the
/// control characters XML 1.0 cannot carry at all replaced with U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The testcase name of findings that belong to no one file (a check of the batch).
pub const NO_FILE: &str = "(all files)";

/// A JUnit report: one testcase per file in `files` (in that order, then one for
/// findings of no file), a `<failure>` per failing finding (type = its rule), the
/// other findings as `<system-out>` lines. `failures` counts failing testcases.
pub fn junit(findings: &[Finding], files: &[String], fail_on_warn: bool) -> String {
    let mut names: Vec<&str> = files.iter().map(String::as_str).collect();
    if findings.iter().any(|f| f.location.file.is_none()) {
        names.push(NO_FILE);
    }
    // Each file's findings in their order, grouped in one pass (not one scan of
    // all findings per file).
    let mut of: std::collections::HashMap<&str, Vec<&Finding>> = Default::default();
    for f in findings {
        let name = f.location.file.as_deref().unwrap_or(NO_FILE);
        of.entry(name).or_default().push(f);
    }
    let mut cases = String::new();
    let mut failing = 0;
    for name in &names {
        let mine = of.get(name).map_or(&[][..], Vec::as_slice);
        failing += usize::from(mine.iter().any(|f| fails(f, fail_on_warn)));
        cases.push_str(&testcase(name, mine, fail_on_warn));
    }
    let counts = format!(
        "tests=\"{}\" failures=\"{failing}\" errors=\"0\"",
        names.len()
    );
    let suite = "kubectl-nvcf-worker validate";
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{suite}\" {counts}>\n  \
         <testsuite name=\"{suite}\" {counts} skipped=\"0\">\n{cases}  </testsuite>\n</testsuites>\n"
    )
}

fn testcase(name: &str, findings: &[&Finding], fail_on_warn: bool) -> String {
    let mut s = format!(
        "    <testcase name=\"{}\" classname=\"kubectl-nvcf-worker.validate\"",
        xml_escape(name)
    );
    if findings.is_empty() {
        s.push_str("/>\n");
        return s;
    }
    s.push_str(">\n");
    let mut out = String::new();
    for f in findings {
        if fails(f, fail_on_warn) {
            let rule = f.rule.unwrap_or("error");
            s.push_str(&format!(
                "      <failure message=\"{}\" type=\"{}\">{}</failure>\n",
                xml_escape(&format!("{rule}: {}", f.message)),
                xml_escape(rule),
                xml_escape(&f.to_text())
            ));
        } else {
            out.push_str(&f.to_text());
            out.push('\n');
        }
    }
    if !out.is_empty() {
        s.push_str(&format!(
            "      <system-out>{}</system-out>\n",
            xml_escape(&out)
        ));
    }
    s.push_str("    </testcase>\n");
    s
}

/// A workflow command's message, escaped as `@actions/core` `escapeData` does.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value, as `@actions/core` `escapeProperty` does.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One `::error` or `::warning` line per error or warning (info findings have no
/// annotation level here and are left out), with the properties in the order
/// `@actions/core` `error()` writes them: title (the rule), file, line, col (as
/// SARIF's, from the line's text that `read_line` gives).
pub fn github(
    findings: &[Finding],
    read_line: &mut dyn FnMut(&str, u32) -> Option<String>,
) -> String {
    let mut out = String::new();
    for f in findings {
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => continue,
        };
        let col = match (&f.location.file, f.location.line) {
            (Some(file), Some(line)) => read_line(file, line)
                .map(|text| crate::sarif::column(&text, f.field.as_deref()).to_string()),
            _ => None,
        };
        let line = f.location.line.map(|l| l.to_string());
        let props: Vec<String> = [
            ("title", f.rule),
            ("file", f.location.file.as_deref()),
            ("line", line.as_deref()),
            ("col", col.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| {
            Some(format!(
                "{k}={}",
                escape_property(v.filter(|v| !v.is_empty())?)
            ))
        })
        .collect();
        out.push_str("::");
        out.push_str(level);
        if !props.is_empty() {
            out.push(' ');
            out.push_str(&props.join(","));
        }
        out.push_str("::");
        out.push_str(&escape_data(&f.detail()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Location;

    fn at(f: Finding, file: &str, line: u32) -> Finding {
        f.at(Location {
            file: Some(file.into()),
            index: Some(0),
            line: Some(line),
        })
    }

    #[test]
    fn xml_escape_keeps_text_and_drops_what_xml_cannot_carry() {
        assert_eq!(
            xml_escape("a<b>&\"c'\t\n\u{1}\u{ffff}é"),
            "a&lt;b&gt;&amp;&quot;c&apos;&#9;&#10;\u{fffd}\u{fffd}é"
        );
    }

    #[test]
    fn junit_has_a_testcase_per_file_and_a_failure_per_error() {
        let findings = vec![
            at(Finding::error("bad <one>").rule("NVW101"), "a.yaml", 3),
            at(Finding::error("bad two").rule("NVW102"), "a.yaml", 9),
            at(Finding::warning("meh").rule("NVW103"), "b.yaml", 1),
        ];
        let files = ["a.yaml".to_string(), "b.yaml".into(), "c.yaml".into()];
        let x = junit(&findings, &files, false);
        assert_eq!(x.matches("<testcase ").count(), 3);
        assert_eq!(x.matches("<failure ").count(), 2);
        assert!(x.contains("tests=\"3\" failures=\"1\""), "{x}");
        assert!(x.contains("bad &lt;one&gt;"));
        assert!(x.contains("<system-out>b.yaml:1: warning NVW103: meh&#10;</system-out>"));
        let strict = junit(&findings, &files, true);
        assert_eq!(strict.matches("<failure ").count(), 3);
        assert!(strict.contains("tests=\"3\" failures=\"2\""), "{strict}");
    }

    #[test]
    fn github_lines_escape_as_the_toolkit_does() {
        let findings = vec![
            at(
                Finding::error("50% off\r\nnow").rule("NVW101"),
                "dir,a:b.yaml",
                7,
            )
            .field("spec.serviceAccountName"),
            Finding::warning("no file"),
            Finding::info("left out"),
        ];
        let mut read = |_: &str, _: u32| Some("  serviceAccountName: x".to_string());
        assert_eq!(
            github(&findings, &mut read),
            "::error title=NVW101,file=dir%2Ca%3Ab.yaml,line=7,col=3::NVW101: 50%25 off%0D%0Anow (spec.serviceAccountName)\n\
             ::warning::no file\n"
        );
    }
}
