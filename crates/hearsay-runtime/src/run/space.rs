//! A change of vector space as a run shows it: announced before the first tick, on the
//! progress bar while it lasts, waited for under `barrier`, and stopped when the store
//! refuses the embedder's vectors.

use std::time::Duration;

use hearsay_memory::{Backfill, SpaceSwitch, StoreError, VectorSpace};
use indicatif::ProgressBar;

use crate::RunError;

/// Says on stderr what a change of vector space did, before the first tick.
pub(super) fn announce_switch(switch: &SpaceSwitch, space: &VectorSpace) {
    if !switch.changed() {
        return;
    }
    let from: Vec<String> = switch
        .retired
        .iter()
        .map(|(model, n)| format!("{n} of {model:?}"))
        .collect();
    let mut line = format!("vector space: {space}");
    if !from.is_empty() {
        line.push_str(&format!(
            "; vectors set aside (kept, out of recall): {}",
            from.join(", ")
        ));
    }
    if switch.restored > 0 {
        line.push_str(&format!(
            "; {} memories have their earlier vectors of this model back",
            switch.restored
        ));
    }
    if switch.reembed > 0 {
        line.push_str(&format!("; re-embedding {} memories", switch.reembed));
    }
    crate::notice::say(&line);
}

/// The re-embedding's progress on the bar, until it is done.
pub(super) fn show_reembedding(
    bar: &ProgressBar,
    backfill: &Backfill,
    switch: &SpaceSwitch,
    space: &VectorSpace,
) {
    if switch.reembed == 0 {
        return;
    }
    let progress = backfill.progress();
    if progress.embedded_through >= switch.pending_through {
        bar.set_message("");
        return;
    }
    // The worker claims the lowest ids first: the memories to re-embed come before any
    // written since.
    bar.set_message(format!(
        "re-embedding with {}: {}/{}",
        space.model,
        progress.embedded.min(switch.pending),
        switch.pending
    ));
}

/// Waits until every memory written before the switch is embedded in the new space, as
/// long as the worker keeps making progress (a stall of `stall` ends the wait: recall
/// then uses what is embedded so far, counted as a barrier timeout). Returns whether it
/// finished.
pub(super) fn wait_reembedded(
    runtime: &tokio::runtime::Runtime,
    backfill: &Backfill,
    switch: &SpaceSwitch,
    space: &VectorSpace,
    stall: Duration,
    bar: &ProgressBar,
) -> Result<bool, RunError> {
    let slice = stall.min(Duration::from_millis(250));
    let mut last = backfill.progress().embedded;
    let mut still = Duration::ZERO;
    loop {
        if runtime.block_on(backfill.wait_embedded_through(switch.pending_through, slice)) {
            show_reembedding(bar, backfill, switch, space);
            return Ok(true);
        }
        refused(backfill)?;
        let progress = backfill.progress();
        if progress.disk_full {
            // The barrier that follows stops the run.
            return Ok(false);
        }
        show_reembedding(bar, backfill, switch, space);
        if progress.embedded == last {
            still += slice;
            if still >= stall {
                tracing::warn!(
                    "re-embedding made no progress for {} ms; recalling what is embedded so far",
                    stall.as_millis()
                );
                return Ok(false);
            }
        } else {
            last = progress.embedded;
            still = Duration::ZERO;
        }
    }
}

/// Stops the run if the store refused the embedder's vectors (another vector space).
pub(super) fn refused(backfill: &Backfill) -> Result<(), RunError> {
    match backfill.refusal() {
        Some(why) => Err(RunError::Store(StoreError::Space(why))),
        None => Ok(()),
    }
}
