//! A report's sites under their diff keys: each key's sites summed, and named by the
//! one with most allocations.

use crate::calibrate::Calibration;
use crate::categories::{self, Category};
use crate::cost;
use crate::matching::Matched;
use crate::naming::{self, job_frames, loose_key, stack_key};
use crate::rank::frames_of;
use crate::report::Report;
use crate::sampling_noise::cost_weight;
use std::collections::{BTreeMap, HashMap};

/// The sites under one key: summed, and named by the one with most allocations
/// (the first by key among equals: the maps are ordered, so a diff reads the same
/// every time).
#[derive(Default, Clone)]
pub(super) struct Acc {
    /// The site with most allocations under this key (its frames name the row).
    pub(super) site_id: u64,
    /// That site's allocations and reallocs.
    pub(super) lead_allocs: u64,
    pub(super) allocs: u64,
    /// The part of `allocs` in the classes below those `sample:N` records whole
    /// (`SiteRow::below_whole`), in any mode: what a sampled side's spread comes
    /// from (the other side's counts are the truth it is measured against).
    pub(super) small_allocs: u64,
    pub(super) bytes: u64,
    pub(super) cost_ns: Option<f64>,
    /// The sum over the key's sites of each one's cost squared over its
    /// allocations, in ns² (`sampling_noise::cost_weight`).
    pub(super) cost_weight_ns2: f64,
    /// The same over their rows below the classes recorded whole.
    pub(super) small_cost_weight_ns2: f64,
    pub(super) name: String,
    pub(super) callers: String,
    pub(super) category: usize,
    pub(super) loose: String,
}

impl Matched for Acc {
    fn loose(&self) -> &str {
        &self.loose
    }

    fn merge(&mut self, o: &Acc) {
        if o.lead_allocs > self.lead_allocs || self.name.is_empty() {
            self.site_id = o.site_id;
            self.lead_allocs = o.lead_allocs;
            self.name.clone_from(&o.name);
            self.callers.clone_from(&o.callers);
            self.category = o.category;
            self.loose.clone_from(&o.loose);
        }
        self.allocs = self.allocs.saturating_add(o.allocs);
        self.small_allocs = self.small_allocs.saturating_add(o.small_allocs);
        self.bytes = self.bytes.saturating_add(o.bytes);
        if let Some(c) = o.cost_ns {
            *self.cost_ns.get_or_insert(0.0) += c;
        }
        self.cost_weight_ns2 += o.cost_weight_ns2;
        self.small_cost_weight_ns2 += o.small_cost_weight_ns2;
    }
}

pub(super) fn by_key(
    report: &Report,
    cal: Option<&Calibration>,
    rules: &[Category],
    phase: Option<&str>,
) -> BTreeMap<String, Acc> {
    let costs = cal.map(|c| cost::per_site(report, c, rules, phase, None));
    let mut keys: HashMap<u64, String> = HashMap::new();
    let mut out: BTreeMap<String, Acc> = BTreeMap::new();
    for row in report.rows(phase) {
        let key = keys
            .entry(row.site_id)
            .or_insert_with(|| stack_key(&job_frames(frames_of(&report.frames, row.site_id))))
            .clone();
        let fresh = !out.contains_key(&key);
        let a = out.entry(key).or_default();
        if fresh || row.calls() > a.lead_allocs {
            let frames = frames_of(&report.frames, row.site_id);
            let job = job_frames(frames);
            a.site_id = row.site_id;
            a.lead_allocs = row.calls();
            a.name = naming::site_name(&job);
            a.callers = naming::callers(&job, crate::rank::CALLERS);
            a.category = categories::classify(rules, frames);
            a.loose = loose_key(&job);
        }
        a.allocs = a.allocs.saturating_add(row.calls());
        if row.below_whole() {
            a.small_allocs = a.small_allocs.saturating_add(row.calls());
        }
        a.bytes = a.bytes.saturating_add(row.bytes_requested);
    }
    // Costs are per site id; sites with one key are summed once each.
    if let Some(costs) = costs {
        for (site, p) in costs {
            let a = out
                .get_mut(&keys[&site])
                .expect("every priced site has rows");
            *a.cost_ns.get_or_insert(0.0) += p.cost.total();
            a.cost_weight_ns2 += cost_weight(p.cost.total(), p.calls);
            a.small_cost_weight_ns2 += cost_weight(p.small_ns, p.small_calls);
        }
    }
    out
}
