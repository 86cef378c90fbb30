//! Where an API key may go. A scenario names both a key's environment variable and the
//! server it is sent to, and scenarios are shared: without a rule, a file from anyone
//! could send `AWS_SECRET_ACCESS_KEY` to a host of its choosing. The rule:
//!
//! - a key goes to a **loopback** server (`127.0.0.0/8`, `::1`, `localhost`) always — it
//!   never leaves the machine;
//! - to a **well-known provider's own host** for that provider's usual variable
//!   ([`BUILT_IN`]: `OPENAI_API_KEY` to `api.openai.com`, …), so the usual snippets work
//!   as they are;
//! - to any other host only when the **user** allowed that pair outside the scenario
//!   ([`KeyPolicy::allow`], fed from `HEARSAY_ALLOW_KEYS` or the user's config file by
//!   the runtime);
//! - and **never over plain `http://`** to a host that is not loopback, whoever allowed it.
//!
//! Anything else is refused before a byte is sent. This module only decides; reading the
//! user's allowances and the keys themselves is the runtime's.

use reqwest::Url;

/// The built-in pairs: a provider's usual key variable and the host (or, with a leading
/// `*.`, the domain) it may be sent to, over https.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "api.openai.com"),
    ("GEMINI_API_KEY", "generativelanguage.googleapis.com"),
    ("GOOGLE_API_KEY", "generativelanguage.googleapis.com"),
    ("ANTHROPIC_API_KEY", "api.anthropic.com"),
    ("AZURE_OPENAI_API_KEY", "*.openai.azure.com"),
    ("MISTRAL_API_KEY", "api.mistral.ai"),
    ("GROQ_API_KEY", "api.groq.com"),
    ("DEEPSEEK_API_KEY", "api.deepseek.com"),
    ("OPENROUTER_API_KEY", "openrouter.ai"),
    ("TOGETHER_API_KEY", "api.together.xyz"),
    ("FIREWORKS_API_KEY", "api.fireworks.ai"),
    ("XAI_API_KEY", "api.x.ai"),
    ("CEREBRAS_API_KEY", "api.cerebras.ai"),
    ("DASHSCOPE_API_KEY", "dashscope.aliyuncs.com"),
    ("DASHSCOPE_API_KEY", "dashscope-intl.aliyuncs.com"),
    ("VOYAGE_API_KEY", "api.voyageai.com"),
    ("JINA_API_KEY", "api.jina.ai"),
];

/// Why a key may go to a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// The server is on this machine.
    Loopback,
    /// The provider's own host for its usual variable.
    BuiltIn,
    /// The user allowed this pair; where they said so.
    User(String),
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Allowed::Loopback => f.write_str("a server on this machine"),
            Allowed::BuiltIn => f.write_str("the provider's own host"),
            Allowed::User(by) => write!(f, "allowed by {by}"),
        }
    }
}

/// A key that may not go where the scenario sends it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{section} would send the key in ${var} to {host}: {why}")]
pub struct KeyRefused {
    /// The scenario section (`[brain]`, `[brains.NAME]`, `[memory.embedder]`).
    pub section: String,
    /// The environment variable holding the key, named by `api_key_env`.
    pub var: String,
    /// The host (and port) of `base_url`.
    pub host: String,
    /// Why sending the key to `host` is refused.
    pub why: String,
    /// How to allow it, when it can be.
    pub help: String,
}

/// A host pattern the user allowed a variable to be sent to: `host`, `host:port` or
/// `*.domain`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostPattern {
    host: String,
    port: Option<u16>,
}

impl HostPattern {
    fn parse(text: &str) -> Option<HostPattern> {
        let text = text.trim().trim_end_matches('/').to_ascii_lowercase();
        let text = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"))
            .unwrap_or(&text);
        if text.is_empty() || text.contains(['/', '@', '?', '#', ' ']) {
            return None;
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') && !h.contains(':') => (h, Some(p.parse().ok()?)),
            _ => (text, None),
        };
        let bare = host.strip_prefix("*.").unwrap_or(host);
        if bare.is_empty() || bare.starts_with('.') || bare.contains('*') {
            return None;
        }
        Some(HostPattern {
            host: host.to_owned(),
            port,
        })
    }

    fn matches(&self, host: &str, port: Option<u16>) -> bool {
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => host.len() > domain.len() + 1 && host.ends_with(&format!(".{domain}")),
            None => host == self.host,
        };
        host_ok && self.port.is_none_or(|p| Some(p) == port)
    }
}

/// The rule, with the user's own allowances.
#[derive(Clone, Debug, Default)]
pub struct KeyPolicy {
    user: Vec<(String, HostPattern, String)>,
}

impl KeyPolicy {
    /// The built-in rule alone.
    pub fn new() -> KeyPolicy {
        KeyPolicy::default()
    }

    /// Adds the user's allowances from `text`, where `by` says where it came from (for
    /// messages): `VAR=HOST` pairs separated by commas or new lines, `#` starting a
    /// comment; `HOST` is `name`, `name:port` or `*.domain`. Returns what could not be
    /// read, so the user hears of a typo instead of a refusal they cannot explain.
    pub fn allow(&mut self, text: &str, by: &str) -> Vec<String> {
        let mut bad = Vec::new();
        for item in text
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default())
            .flat_map(|l| l.split(','))
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            let parsed = item.split_once('=').and_then(|(var, host)| {
                let var = var.trim();
                let valid =
                    !var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                Some((var.to_owned(), HostPattern::parse(host)?)).filter(|_| valid)
            });
            match parsed {
                Some((var, pattern)) => self.user.push((var, pattern, by.to_owned())),
                None => bad.push(format!(
                    "{by}: {item:?} is not VAR=HOST (e.g. MY_KEY=llm.example.com)"
                )),
            }
        }
        bad
    }

    /// Whether the key in `var` may be sent to `base_url` (named in `section`).
    pub fn check(&self, section: &str, var: &str, base_url: &str) -> Result<Allowed, KeyRefused> {
        let refuse = |host: String, why: &str, help: String| KeyRefused {
            section: section.to_owned(),
            var: var.to_owned(),
            host,
            why: why.to_owned(),
            help,
        };
        let Some((scheme, host, port)) = host_of(base_url) else {
            return Err(refuse(
                base_url.to_owned(),
                "base_url is not a URL with a host",
                "fix base_url".into(),
            ));
        };
        let shown = match port {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        if is_loopback(&host) {
            return Ok(Allowed::Loopback);
        }
        if scheme != "https" {
            return Err(refuse(
                shown,
                "a key never travels over plain http to another machine",
                "use https:// for a remote server, or leave api_key_env out if it needs no key"
                    .into(),
            ));
        }
        // A provider's own host on its own port (https's, which a URL leaves out).
        let built_in = port.is_none()
            && BUILT_IN.iter().any(|(v, h)| {
                *v == var && HostPattern::parse(h).is_some_and(|p| p.matches(&host, None))
            });
        if built_in {
            return Ok(Allowed::BuiltIn);
        }
        if let Some((_, _, by)) = self
            .user
            .iter()
            .find(|(v, p, _)| v == var && p.matches(&host, port))
        {
            return Ok(Allowed::User(by.clone()));
        }
        let usual: Vec<&str> = BUILT_IN
            .iter()
            .filter(|(v, _)| *v == var)
            .map(|(_, h)| *h)
            .collect();
        let why = if usual.is_empty() {
            "that pair is not one hearsay knows, and you have not allowed it".to_owned()
        } else {
            format!(
                "${var} is for {}; you have not allowed it anywhere else",
                usual.join(" or ")
            )
        };
        Err(KeyRefused {
            section: section.to_owned(),
            var: var.to_owned(),
            host: shown.clone(),
            why,
            help: format!(
                "if you trust {shown} with ${var}, allow the pair outside the scenario: \
                 export HEARSAY_ALLOW_KEYS=\"{var}={shown}\" (or add the line {var}={shown} to \
                 ~/.config/hearsay/allowed-keys); a scenario can never allow it itself"
            ),
        })
    }
}

/// (scheme, lowercase host without brackets, explicit port) of `url`.
pub fn host_of(url: &str) -> Option<(String, String, Option<u16>)> {
    let parsed = Url::parse(url).ok()?;
    // The URL parser has already normalised the host (IPv4 in any notation becomes
    // dotted decimal, IDNs become punycode), exactly as the HTTP client will use it.
    let host = parsed
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    Some((parsed.scheme().to_owned(), host, parsed.port()))
}

/// Whether `host` (as [`host_of`] gives it) is this machine's loopback: `127.0.0.0/8`,
/// `::1` (or an IPv4-mapped loopback), `localhost` and names under `.localhost`. The
/// unspecified address (`0.0.0.0`) is not: it is not a name for loopback everywhere.
pub fn is_loopback(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(policy: &KeyPolicy, var: &str, url: &str) -> Result<Allowed, String> {
        policy.check("[brain]", var, url).map_err(|e| e.to_string())
    }

    #[test]
    fn loopback_always_built_in_hosts_for_their_variable_nothing_else() {
        let p = KeyPolicy::new();
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://127.9.9.9/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8000/v1",
            "http://LOCALHOST./v1",
            "http://[::ffff:127.0.0.1]/v1",
            "http://2130706433:8080/v1",
            "http://0x7f.1/v1",
        ] {
            assert_eq!(check(&p, "ANY_VAR", url), Ok(Allowed::Loopback), "{url}");
        }
        assert_eq!(
            check(&p, "OPENAI_API_KEY", "https://api.openai.com/v1"),
            Ok(Allowed::BuiltIn)
        );
        assert_eq!(
            check(
                &p,
                "GEMINI_API_KEY",
                "https://generativelanguage.googleapis.com/v1beta/openai/"
            ),
            Ok(Allowed::BuiltIn)
        );
        assert_eq!(
            check(
                &p,
                "AZURE_OPENAI_API_KEY",
                "https://me.openai.azure.com/openai/v1"
            ),
            Ok(Allowed::BuiltIn)
        );
        for (var, url, phrase) in [
            // The issue's own reproduction: any variable to any host over http.
            (
                "AWS_SECRET_ACCESS_KEY",
                "http://192.0.2.2:18081/v1",
                "plain http",
            ),
            ("HOME", "https://evil.example/v1", "not one hearsay knows"),
            // A provider's variable to someone else's host.
            (
                "OPENAI_API_KEY",
                "https://api.openai.com.evil.example/v1",
                "is for api.openai.com",
            ),
            (
                "OPENAI_API_KEY",
                "https://evil.example/api.openai.com/v1",
                "is for",
            ),
            ("OPENAI_API_KEY", "https://api.openai.com:8443/v1", "is for"),
            ("OPENAI_API_KEY", "http://api.openai.com/v1", "plain http"),
            (
                "AZURE_OPENAI_API_KEY",
                "https://openai.azure.com/v1",
                "is for",
            ),
            ("GEMINI_API_KEY", "https://api.openai.com/v1", "is for"),
            // Not loopback, whatever it looks like.
            ("X", "http://0.0.0.0:8080/v1", "plain http"),
            ("X", "http://127.0.0.1.nip.io/v1", "plain http"),
            (
                "X",
                "https://user:pw@127.0.0.1.evil.example/v1",
                "not one hearsay knows",
            ),
            ("X", "not a url", "not a URL"),
        ] {
            let err = check(&p, var, url).expect_err(url);
            assert!(err.contains(phrase), "{var} -> {url}: {err}");
        }
    }

    #[test]
    fn the_user_allows_pairs_outside_the_scenario() {
        let mut p = KeyPolicy::new();
        let bad = p.allow(
            "MY_KEY=llm.internal.example, OTHER=*.corp.example:8443 # team servers\n\
             junk\nNOHOST=\nBAD VAR=x.example\n",
            "HEARSAY_ALLOW_KEYS",
        );
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert_eq!(
            check(&p, "MY_KEY", "https://llm.internal.example/v1"),
            Ok(Allowed::User("HEARSAY_ALLOW_KEYS".into()))
        );
        assert!(check(&p, "MY_KEY", "https://llm.internal.example:9000/v1").is_ok());
        assert!(check(&p, "MY_KEY", "https://other.example/v1").is_err());
        assert!(check(&p, "OTHER_KEY", "https://llm.internal.example/v1").is_err());
        assert!(check(&p, "OTHER", "https://a.corp.example:8443/v1").is_ok());
        assert!(
            check(&p, "OTHER", "https://a.corp.example/v1").is_err(),
            "port"
        );
        assert!(
            check(&p, "OTHER", "https://corp.example:8443/v1").is_err(),
            "subdomains only"
        );
        let err = check(&p, "MY_KEY", "http://llm.internal.example/v1").expect_err("http");
        assert!(err.contains("plain http"), "{err}");
        let refusal = p
            .check("[brains.x]", "NOPE", "https://h.example/v1")
            .expect_err("refused");
        assert!(
            refusal
                .help
                .contains("HEARSAY_ALLOW_KEYS=\"NOPE=h.example\"")
        );
    }
}
