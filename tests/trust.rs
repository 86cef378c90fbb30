//! Keys go only where the user said, and run directories are data: every case of issue
//! 15 where a scenario or a run directory chose where a key went, tried again with a
//! [`Recorder`] standing where the key would have gone — as the target itself
//! (`0.0.0.0:PORT` reaches it; hearsay must not treat it as loopback), or as the HTTP
//! proxy that every request to a far host (`192.0.2.2`, `evil.example`) would pass
//! through. Each is refused before anything is sent, and the recorder saw nothing.

use std::path::Path;
use std::process::{Command, Output};

use hearsay_tests::mock::{ChatCall, MockServer, Recorder, Reply};
use hearsay_tests::{assert_untouched, bin, path_str, root, snapshot};

const KEY: &str = "sk-hearsay-trust-sentinel-5f1e";

/// A three-NPC scenario whose brain and embedder call `brain_url` and `embed_url`, with
/// the key in `key_var` (none if `None`).
pub(crate) fn scenario(brain_url: &str, embed_url: &str, key_var: Option<&str>) -> String {
    let key = key_var
        .map(|v| format!("api_key_env = \"{v}\"\n"))
        .unwrap_or_default();
    let mut s = format!(
        "name = \"trust\"\nseed = 5\nticks = 4\n\n[world]\nwidth = 10\nheight = 6\nhearing_radius = 6\n\n\
         [[places]]\nname = \"market\"\nat = [5, 3]\n\n\
         [brain]\nprovider = \"openai\"\nbase_url = \"{brain_url}\"\nmodel = \"mock\"\n{key}max_retries = 0\nretry_base_ms = 1\ntimeout_ms = 3000\n\n\
         [memory]\nvisibility = \"barrier\"\nbarrier_timeout_ms = 300\ndrain_timeout_ms = 300\n\n\
         [memory.embedder]\nprovider = \"openai\"\nbase_url = \"{embed_url}\"\nmodel = \"mock-embed\"\n{key}max_retries = 0\ntimeout_ms = 3000\n\n"
    );
    for i in 0..3 {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [{}, 3]\nmemories = [{{ content = \"Fish at the market.\", importance = 8 }}]\n\n",
            i * 2 + 1
        ));
    }
    s.push_str("[[facts]]\nname = \"fish\"\nmatch = [\"fish\"]\n");
    s
}

/// Runs `hearsay ARGS` with the sentinel in every variable a test names, and `env`.
fn hearsay(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(bin());
    command
        .args(args)
        .current_dir(root())
        .env_remove("RUST_LOG")
        .env_remove("HEARSAY_ALLOW_KEYS")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        // No user allowance file from the machine running the tests.
        .env("HEARSAY_CONFIG_DIR", root().join("tests/no-such-config"))
        .env("HEARSAY_TEST_KEY", KEY)
        .env("AWS_SECRET_ACCESS_KEY", KEY)
        .env("OPENAI_API_KEY", KEY);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("hearsay starts")
}

/// Every variable through the recorder, as a proxy, except loopback.
fn via(recorder: &Recorder) -> Vec<(&'static str, String)> {
    let proxy = format!("http://{}", recorder.addr);
    vec![
        ("HTTP_PROXY", proxy.clone()),
        ("HTTPS_PROXY", proxy.clone()),
        ("ALL_PROXY", proxy),
        ("NO_PROXY", "127.0.0.1,localhost".into()),
    ]
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// (what, base_url, key variable, extra environment, what the refusal says).
type Case<'a> = (&'a str, String, &'a str, Vec<(&'a str, String)>, &'a str);

#[test]
fn a_scenario_cannot_send_a_key_anywhere_the_user_did_not_allow() {
    let recorder = Recorder::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = recorder.addr.port();
    let local_alias = format!("http://0.0.0.0:{port}/v1");
    let allow_http = vec![(
        "HEARSAY_ALLOW_KEYS",
        format!("HEARSAY_TEST_KEY=0.0.0.0:{port}"),
    )];
    let cases: Vec<Case> = vec![
        (
            "AWS secret to an address over http",
            "http://192.0.2.2:18081/v1".into(),
            "AWS_SECRET_ACCESS_KEY",
            Vec::new(),
            "a key never travels over plain http to another machine",
        ),
        (
            "HOME to a host of the scenario's choosing",
            "https://evil.example/v1".into(),
            "HOME",
            Vec::new(),
            "that pair is not one hearsay knows",
        ),
        (
            "a provider's key to a look-alike host",
            "https://api.openai.com.evil.example/v1".into(),
            "OPENAI_API_KEY",
            Vec::new(),
            "$OPENAI_API_KEY is for api.openai.com",
        ),
        (
            "a key to 0.0.0.0, which is not loopback",
            local_alias.clone(),
            "HEARSAY_TEST_KEY",
            Vec::new(),
            "plain http",
        ),
        (
            "a pair the user allowed, over plain http off loopback",
            local_alias.clone(),
            "HEARSAY_TEST_KEY",
            allow_http,
            "plain http",
        ),
    ];
    for (i, (what, url, var, extra, phrase)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("s{i}.toml"));
        std::fs::write(&file, scenario(&url, &url, Some(var))).expect("write");
        let out = dir.path().join(format!("run{i}"));
        let before = snapshot(dir.path());
        let mut env = via(&recorder);
        env.extend(extra);
        for args in [
            vec!["run", path_str(&file), "--out", path_str(&out)],
            vec!["validate", path_str(&file)],
        ] {
            let o = hearsay(&args, &env);
            let said = text(&o);
            assert_eq!(o.status.code(), Some(2), "{what} ({}): {said}", args[0]);
            assert!(
                said.contains(phrase) && said.contains(&format!("${var}")),
                "{what}: {said}"
            );
            assert!(!said.contains(KEY), "{what}: the key was printed");
        }
        assert!(
            text(&hearsay(
                &["run", path_str(&file), "--out", path_str(&out)],
                &env
            ))
            .contains("nothing was sent"),
            "{what}"
        );
        assert_untouched(&before, &snapshot(dir.path()), what);
        assert!(
            recorder.log().is_empty(),
            "{what}: the recorder saw {:?}",
            recorder.log()
        );
    }

    // The recorder does see what goes that way: the same far host with no key is called
    // (through the proxy), without an Authorization header.
    let file = dir.path().join("nokey.toml");
    let far = "http://192.0.2.2:18081/v1";
    std::fs::write(&file, scenario(far, far, None)).expect("write");
    let out = dir.path().join("nokey");
    let o = hearsay(
        &["run", path_str(&file), "--out", path_str(&out)],
        &via(&recorder),
    );
    let seen = recorder.log();
    assert!(
        seen.iter()
            .any(|r| r.target == "http://192.0.2.2:18081/v1/models"),
        "the proxy saw the far host's requests: {seen:?}\n{}",
        text(&o)
    );
    assert!(seen.iter().all(|r| r.authorization.is_none()));
    assert!(
        text(&o)
            .contains("network: [brain] model \"mock\" at http://192.0.2.2:18081/v1 with no key")
    );
    println!(
        "figure: keys: 5 refused pairs × run and validate: exit 2, nothing written, 0 requests; the control without a key: {} requests seen by the recorder",
        seen.len()
    );
}

#[test]
fn loopback_gets_the_key_and_the_user_is_told_first() {
    let mock = MockServer::start(|_: &ChatCall| {
        Reply::answer(r#"{"action": "talk", "speech": "Fish at the market.", "x": 0, "y": 0}"#)
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        scenario(&mock.url, &mock.url, Some("HEARSAY_TEST_KEY")),
    )
    .expect("write");
    let out = dir.path().join("run");
    let o = hearsay(&["run", path_str(&file), "--out", path_str(&out)], &[]);
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    let first = String::from_utf8_lossy(&o.stderr)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        first,
        format!(
            "network: [brain] model \"mock\" at {} with key $HEARSAY_TEST_KEY (a server on this machine)",
            mock.url
        ),
        "said before anything else"
    );
    let log = mock.log();
    assert!(!log.is_empty());
    assert!(
        log.iter()
            .all(|l| l.call.authorization.as_deref() == Some(&format!("Bearer {KEY}"))),
        "loopback gets the key"
    );
    let v = hearsay(&["validate", path_str(&file)], &[]);
    assert!(v.status.success());
    assert!(
        String::from_utf8_lossy(&v.stdout)
            .contains("network: [memory.embedder] model \"mock-embed\" at http://127.0.0.1:")
    );
}

/// A run made against a mock, then shared: its `scenario.toml` or `run.json` edited to
/// send the key to the recorder. Every command that would call out refuses.
#[test]
fn a_run_directory_cannot_steer_a_key() {
    let mock = MockServer::start(|_: &ChatCall| {
        Reply::answer(r#"{"action": "talk", "speech": "Fish at the market.", "x": 0, "y": 0}"#)
    });
    let recorder = Recorder::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    let good = scenario(&mock.url, &mock.url, Some("HEARSAY_TEST_KEY"));
    std::fs::write(&file, &good).expect("write");
    let run = dir.path().join("run");
    let o = hearsay(&["run", path_str(&file), "--out", path_str(&run)], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let r = path_str(&run);
    let fork = dir.path().join("fork");
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "ask",
            r,
            "--npc",
            "N0",
            "--at-tick",
            "1",
            "Where is the fish?",
        ],
        vec![
            "inspect",
            r,
            "--npc",
            "N0",
            "--query",
            "fish",
            "--at-tick",
            "1",
        ],
        vec!["fork", r, "--at-tick", "1", "--out", path_str(&fork)],
    ];

    // 1. run.json keeps an "earlier scenario" that calls the recorder (loopback, so the
    //    key policy alone would let it): a stage scenario.toml does not show is refused.
    let recorder_url = format!("http://{}/v1", recorder.addr);
    let manifest_path = run.join("run.json");
    let original = std::fs::read_to_string(&manifest_path).expect("run.json");
    let mut manifest: serde_json::Value = serde_json::from_str(&original).expect("json");
    manifest["earlier_scenarios"] = serde_json::json!([{
        "until_tick": 3,
        "text": scenario(&recorder_url, &recorder_url, Some("HEARSAY_TEST_KEY")),
    }]);
    std::fs::write(&manifest_path, manifest.to_string()).expect("write");
    let before = snapshot(dir.path());
    for args in &commands {
        let o = hearsay(args, &[]);
        let said = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains("run.json") && said.contains("which scenario.toml does not"),
            "{args:?}: {said}"
        );
    }
    let v = hearsay(&["validate", r], &[]);
    assert_eq!(v.status.code(), Some(2), "{}", text(&v));
    assert_untouched(&before, &snapshot(dir.path()), "run.json stage");
    assert!(recorder.log().is_empty(), "{:?}", recorder.log());

    // 2. scenario.toml itself sends the key to 0.0.0.0 (the recorder, not loopback).
    std::fs::write(&manifest_path, &original).expect("restore");
    let alias = format!("http://0.0.0.0:{}/v1", recorder.addr.port());
    std::fs::write(
        run.join("scenario.toml"),
        scenario(&alias, &alias, Some("HEARSAY_TEST_KEY")),
    )
    .expect("write");
    let before = snapshot(dir.path());
    let mut all = commands.clone();
    all.push(vec!["resume", r]);
    for args in &all {
        let o = hearsay(args, &via(&recorder));
        let said = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains("plain http"), "{args:?}: {said}");
    }
    assert_untouched(&before, &snapshot(dir.path()), "scenario.toml edited");
    assert!(recorder.log().is_empty(), "{:?}", recorder.log());
    assert!(!Path::new(&fork).exists());
}
