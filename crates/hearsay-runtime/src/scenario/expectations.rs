//! `[[expect]]` as written, checked into [`Expectation`]s (judged later, on the story,
//! by `crate::expect`).

use super::*;

pub(super) fn expectation(
    problems: &mut Problems,
    spanned: &Spanned<raw::RawExpect>,
    known: &Known<'_>,
    ticks: u64,
    grid: Grid,
) -> Option<Expectation> {
    let e = spanned.get_ref();
    let at = spanned.span();
    const FORMS: &str = "fact = \"…\" with share_at_least, share_at_most or knowers_at_least; \
                         or npc = \"…\" with knows = \"fact\" or reaches = \"place\"";
    if let Some(t) = &e.by_tick
        && ticks > 0
        && *t.get_ref() >= ticks
    {
        problems.note(
            t.span().start,
            format_args!(
                "note: by_tick = {} is never reached: this run has ticks 0..{}, so the \
                 expectation will not be checked",
                t.get_ref(),
                ticks - 1
            ),
        );
    }
    if let (Some(w), None) = (&e.within, &e.reaches) {
        problems.add(w.span(), "within only goes with reaches", None);
    }
    // No two cells are farther apart than this, however distance is measured.
    let farthest = (u64::from(grid.width) + u64::from(grid.height)).saturating_sub(2);
    if let Some(w) = &e.within
        && u64::from(*w.get_ref()) >= farthest.max(1)
    {
        problems.add(
            w.span(),
            format!(
                "within = {} covers the whole {} × {} map: the expectation always holds",
                w.get_ref(),
                grid.width,
                grid.height
            ),
            Some("within is a distance in cells from the place"),
        );
    }
    let by_tick = e.by_tick.as_ref().map(|t| *t.get_ref());
    let what = match (&e.fact, &e.npc) {
        (Some(fact), None) => {
            let fact = one_of(problems, fact, known.facts, "fact", "[[facts]]");
            if let Some(k) = e.knows.as_ref().or(e.reaches.as_ref()) {
                problems.add(
                    k.span(),
                    "knows and reaches go with npc, not with fact",
                    Some(FORMS),
                );
            }
            let conditions = [
                e.share_at_least.is_some(),
                e.share_at_most.is_some(),
                e.knowers_at_least.is_some(),
            ]
            .iter()
            .filter(|c| **c)
            .count();
            if conditions != 1 {
                problems.add(
                    at,
                    format!(
                        "an [[expect]] about a fact needs exactly one of share_at_least, share_at_most, knowers_at_least ({conditions} given)"
                    ),
                    Some("write one [[expect]] per condition"),
                );
                return None;
            }
            if let Some(s) = &e.share_at_least {
                Expect::ShareAtLeast {
                    fact,
                    share: share(problems, s),
                }
            } else if let Some(s) = &e.share_at_most {
                Expect::ShareAtMost {
                    fact,
                    share: share(problems, s),
                }
            } else {
                let n = e.knowers_at_least.as_ref()?;
                if *n.get_ref() as usize > known.npcs.len() {
                    problems.add(
                        n.span(),
                        format!(
                            "knowers_at_least = {} can never be met: the scenario has {} NPCs",
                            n.get_ref(),
                            known.npcs.len()
                        ),
                        None,
                    );
                }
                Expect::KnowersAtLeast {
                    fact,
                    knowers: *n.get_ref(),
                }
            }
        }
        (None, Some(npc)) => {
            let npc = one_of(problems, npc, known.npcs, "NPC", "[[npcs]]");
            for (name, set) in [
                (
                    "share_at_least",
                    e.share_at_least.as_ref().map(Spanned::span),
                ),
                ("share_at_most", e.share_at_most.as_ref().map(Spanned::span)),
                (
                    "knowers_at_least",
                    e.knowers_at_least.as_ref().map(Spanned::span),
                ),
            ] {
                if let Some(span) = set {
                    problems.add(
                        span,
                        format!("{name} goes with fact, not with npc"),
                        Some(FORMS),
                    );
                }
            }
            match (&e.knows, &e.reaches) {
                (Some(fact), None) => Expect::Knows {
                    npc,
                    fact: one_of(problems, fact, known.facts, "fact", "[[facts]]"),
                },
                (None, Some(place)) => Expect::Reaches {
                    npc,
                    place: one_of(problems, place, known.places, "place", "[[places]]"),
                    within: e.within.as_ref().map_or(0, |w| *w.get_ref()),
                },
                _ => {
                    problems.add(
                        at,
                        "an [[expect]] about an NPC needs exactly one of knows, reaches",
                        Some(FORMS),
                    );
                    return None;
                }
            }
        }
        (Some(_), Some(_)) => {
            problems.add(
                at,
                "an [[expect]] is about a fact or about an NPC, not both",
                Some("write two [[expect]] entries"),
            );
            return None;
        }
        (None, None) => {
            problems.add(at, "an [[expect]] needs fact or npc", Some(FORMS));
            return None;
        }
    };
    Some(Expectation { what, by_tick })
}
