//! Scenario expectations (`[[expect]]`), judged on the story of a finished run: met, not
//! met, or not checked (the run ended before the tick it names and nothing was decided
//! yet). `hearsay run` prints each and exits non-zero when one is not met; `hearsay
//! sweep` counts them over seeds.

use serde::{Deserialize, Serialize};

use crate::scenario::{Expect, Expectation};
use crate::story::Story;

/// How an expectation came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It holds.
    Met,
    /// It does not.
    Unmet,
    /// The run ended before `by_tick` and it was not decided by then.
    Unchecked,
}

/// One judged expectation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// What was expected, in words.
    pub expect: String,
    /// Met, unmet, or unchecked when the run ended before `by_tick`.
    pub verdict: Verdict,
    /// The evidence, in words.
    pub detail: String,
    /// The tick it was met at (for a `share_at_most`: the tick it was broken at).
    pub tick: Option<u64>,
    /// The expectation as written.
    pub spec: Expectation,
}

/// Judges every expectation on `story`.
pub fn judge(expectations: &[Expectation], story: &Story) -> Vec<Judged> {
    expectations.iter().map(|e| judge_one(e, story)).collect()
}

fn judge_one(e: &Expectation, story: &Story) -> Judged {
    let last = story.completed.saturating_sub(1);
    let by = e.by_tick.unwrap_or(last);
    let ended_early = story.completed <= by;
    let n = story.cast.npcs.len().max(1);
    let name = |i: usize| story.cast.npcs.get(i).cloned().unwrap_or_default();
    // The first tick at which `fact` had `needed` knowers.
    let reaching = |fact: usize, needed: usize| match needed {
        0 => Some(0),
        _ => story.knowers[fact].get(needed - 1).map(|k| k.tick),
    };
    let undecided = |what: String| {
        if ended_early {
            (
                Verdict::Unchecked,
                format!("{what} when the run ended at tick {last}, before tick {by}"),
                None,
            )
        } else {
            (Verdict::Unmet, what, None)
        }
    };
    // The scenario was validated, so its names exist; an edited run directory may not
    // keep them.
    let missing = |what: &str| Judged {
        expect: e.describe(),
        verdict: Verdict::Unmet,
        detail: format!("the run has no such {what}"),
        tick: None,
        spec: e.clone(),
    };
    let fact_index = |fact: &str| story.cast.fact(fact);
    let (verdict, detail, tick) = match &e.what {
        Expect::ShareAtLeast { fact, share } => {
            let Some(f) = fact_index(fact) else {
                return missing("fact");
            };
            let needed = ((share * n as f64) - 1e-9).ceil().max(0.0) as usize;
            let k = story.knowers_by(f, by.min(last));
            match reaching(f, needed).filter(|t| *t <= by) {
                Some(t) => (
                    Verdict::Met,
                    format!(
                        "met at tick {t}; {k} of {n} knew it by tick {}",
                        by.min(last)
                    ),
                    Some(t),
                ),
                None => undecided(format!(
                    "{k} of {n} ({:.0}%) knew it",
                    k as f64 * 100.0 / n as f64
                )),
            }
        }
        Expect::ShareAtMost { fact, share } => {
            let Some(f) = fact_index(fact) else {
                return missing("fact");
            };
            let allowed = ((share * n as f64) + 1e-9).floor() as usize;
            let k = story.knowers_by(f, by.min(last));
            match reaching(f, allowed + 1).filter(|t| *t <= by) {
                Some(t) => (
                    Verdict::Unmet,
                    format!(
                        "{} of {n} knew it at tick {t}; {k} by tick {}",
                        allowed + 1,
                        by.min(last)
                    ),
                    Some(t),
                ),
                None if ended_early => (
                    Verdict::Unchecked,
                    format!(
                        "{k} of {n} knew it when the run ended at tick {last}, before tick {by}"
                    ),
                    None,
                ),
                None => (
                    Verdict::Met,
                    format!(
                        "{k} of {n} ({:.0}%) knew it by tick {by}",
                        k as f64 * 100.0 / n as f64
                    ),
                    None,
                ),
            }
        }
        Expect::KnowersAtLeast { fact, knowers } => match fact_index(fact) {
            None => return missing("fact"),
            Some(f) => {
                let k = story.knowers_by(f, by.min(last));
                match reaching(f, *knowers as usize).filter(|t| *t <= by) {
                    Some(t) => (
                        Verdict::Met,
                        format!(
                            "met at tick {t}; {k} of {n} knew it by tick {}",
                            by.min(last)
                        ),
                        Some(t),
                    ),
                    None => undecided(format!("{k} of {n} knew it")),
                }
            }
        },
        Expect::Knows { npc, fact } => match (story.cast.npc(npc), story.cast.fact(fact)) {
            (Some(who), Some(f)) => match story.knowing(f, who).filter(|k| k.tick <= by) {
                Some(k) => {
                    let how = match k.how {
                        crate::story::How::Told { by } => format!(", told by {}", name(by)),
                        crate::story::How::Seed => ", from the start".to_owned(),
                        crate::story::How::Witnessed => ", seen first-hand".to_owned(),
                        crate::story::How::Invented => ", of its own making".to_owned(),
                    };
                    (
                        Verdict::Met,
                        format!("since tick {}{how}", k.tick),
                        Some(k.tick),
                    )
                }
                None => undecided(match story.knowing(f, who) {
                    Some(k) => format!("only learned it at tick {}", k.tick),
                    None => "never learned it".to_owned(),
                }),
            },
            _ => return missing("NPC or fact"),
        },
        Expect::Reaches { npc, place, within } => {
            match (story.cast.npc(npc), story.cast.place(place)) {
                (Some(who), Some(p)) => {
                    let at = story.cast.places[p].1;
                    match story.first_within(who, at, *within).filter(|t| *t <= by) {
                        Some(t) => (Verdict::Met, format!("at tick {t}"), Some(t)),
                        None => {
                            let (nearest, end) = story.closest(who, at);
                            let end = end.map_or("nowhere".to_owned(), |p| p.to_string());
                            undecided(format!(
                                "came within {nearest:.1} cells at best; was at {end} at the end"
                            ))
                        }
                    }
                }
                _ => return missing("NPC or place"),
            }
        }
    };
    Judged {
        expect: e.describe(),
        verdict,
        detail,
        tick,
        spec: e.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::story::{Cast, Frame};

    fn story(text: &str) -> Story {
        let scenario = crate::scenario::parse(std::path::Path::new("t.toml"), text.as_bytes())
            .expect("valid scenario");
        let cast = Cast::new(&scenario);
        let mut story = Story::new(cast.clone());
        let lines = [
            vec![
                r#"{"type":"spawn","tick":0,"npc":"A","at":[0,0]}"#,
                r#"{"type":"spawn","tick":0,"npc":"B","at":[3,0]}"#,
                r#"{"type":"memory","tick":0,"npc":"A","id":1,"kind":"seed","importance":8,"content":"fish"}"#,
                r#"{"type":"learned","tick":0,"fact":"fish","npc":"A","from":null,"memory":1}"#,
                r#"{"type":"tick","tick":0,"hash":"0"}"#,
            ],
            vec![
                r#"{"type":"move","tick":1,"npc":"B","from":[3,0],"to":[2,0],"target":[1,0],"recalled":[]}"#,
                r#"{"type":"tick","tick":1,"hash":"1"}"#,
            ],
            vec![
                r#"{"type":"memory","tick":2,"npc":"B","id":2,"kind":"conversation","importance":8,"content":"A said: fish","from":"A"}"#,
                r#"{"type":"learned","tick":2,"fact":"fish","npc":"B","from":"A","memory":2}"#,
                r#"{"type":"tick","tick":2,"hash":"2"}"#,
            ],
        ];
        for tick in lines {
            let tick: Vec<String> = tick.iter().map(|s| (*s).to_owned()).collect();
            story.apply(&Frame::parse(&tick, &cast).expect("frame"));
        }
        story
    }

    const SCENARIO: &str = r#"
name = "t"
ticks = 10
[world]
width = 5
height = 5
hearing_radius = 1
[[places]]
name = "well"
at = [1, 0]
[[npcs]]
name = "A"
at = [0, 0]
[[npcs]]
name = "B"
at = [3, 0]
[[facts]]
name = "fish"
match = ["fish"]
"#;

    fn verdicts(expect: &str) -> Vec<(Verdict, String)> {
        let text = format!("{SCENARIO}\n{expect}");
        let scenario =
            crate::scenario::parse(std::path::Path::new("t.toml"), text.as_bytes()).expect("valid");
        judge(&scenario.expectations, &story(SCENARIO))
            .into_iter()
            .map(|j| (j.verdict, j.detail))
            .collect()
    }

    #[test]
    fn spreads_are_judged_by_their_tick() {
        let v = verdicts(
            "[[expect]]\nfact = \"fish\"\nshare_at_least = 1.0\nby_tick = 2\n\
             [[expect]]\nfact = \"fish\"\nshare_at_least = 1.0\nby_tick = 1\n\
             [[expect]]\nfact = \"fish\"\nshare_at_most = 0.5\nby_tick = 1\n\
             [[expect]]\nfact = \"fish\"\nshare_at_most = 0.5\nby_tick = 2\n\
             [[expect]]\nfact = \"fish\"\nknowers_at_least = 2\nby_tick = 9\n",
        );
        assert_eq!(
            v[0],
            (
                Verdict::Met,
                "met at tick 2; 2 of 2 knew it by tick 2".into()
            )
        );
        assert_eq!(v[1], (Verdict::Unmet, "1 of 2 (50%) knew it".into()));
        assert_eq!(v[2].0, Verdict::Met);
        assert_eq!(
            v[3],
            (
                Verdict::Unmet,
                "2 of 2 knew it at tick 2; 2 by tick 2".into()
            )
        );
        assert_eq!(v[4].0, Verdict::Met, "met before the run ended, so decided");
    }

    #[test]
    fn npcs_are_judged_by_what_they_knew_and_where_they_went() {
        let v = verdicts(
            "[[expect]]\nnpc = \"B\"\nknows = \"fish\"\n\
             [[expect]]\nnpc = \"B\"\nknows = \"fish\"\nby_tick = 1\n\
             [[expect]]\nnpc = \"B\"\nreaches = \"well\"\nwithin = 1\n\
             [[expect]]\nnpc = \"B\"\nreaches = \"well\"\nby_tick = 9\n\
             [[expect]]\nnpc = \"B\"\nreaches = \"well\"\n",
        );
        assert_eq!(v[0], (Verdict::Met, "since tick 2, told by A".into()));
        assert_eq!(v[1], (Verdict::Unmet, "only learned it at tick 2".into()));
        assert_eq!(v[2], (Verdict::Met, "at tick 1".into()));
        assert_eq!(v[3].0, Verdict::Unchecked, "{}", v[3].1);
        assert!(v[3].1.contains("before tick 9"), "{}", v[3].1);
        assert_eq!(
            v[4],
            (
                Verdict::Unmet,
                "came within 1.0 cells at best; was at (2, 0) at the end".into()
            )
        );
    }
}
