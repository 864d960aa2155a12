//! Microbenchmarks of the replay core without Python (issue 20): µs per call of `sample(256)`
//! (plain, n-step 3, PER with updates) and of the floor gather (n-step 1 and 3), at capacities
//! 10k, 200k and 1M, obs 17 / act 6 float32 (the suite's shapes); HER `sample(256)` with the
//! native reward (and n-step 3) and the floor gather of the same HER buffer, on 100k transitions
//! of FetchReach-sized goal episodes (the suite's HER data).
//! `cargo bench -p rlcore-core --bench sample [CAP [NAME]]`; medians (and range) of 15 blocks of
//! 400 calls, in CPU time of this thread.
//! Never part of `cargo test`.

use std::time::Instant;

use rlcore_core::{
    Array, BatchOut, DType, GoalStrategy, HerConfig, Obs, ReplayCore, Result, Steps,
};

const OBS: usize = 17;
const ACT: usize = 6;
const B: usize = 256;

/// The benchmark data's generator (xorshift64; not the buffer's).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }
}

fn filled(cap: usize, per: bool) -> Result<ReplayCore> {
    let mut core = ReplayCore::new(cap, 1, 0)?;
    if per {
        core.enable_per(0.6, 0.4, 1e-6)?;
    }
    let n = cap;
    let mut x = XorShift(1);
    let mut rnd = || (x.next() >> 40) as f32 / (1u64 << 24) as f32;
    let obs_all: Vec<f32> = (0..(n + 1) * OBS).map(|_| rnd()).collect();
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|f| f.to_ne_bytes()).collect() };
    let obs = bytes(&obs_all[..n * OBS]);
    let obs_next = bytes(&obs_all[OBS..]);
    let act = bytes(&(0..n * ACT).map(|_| rnd()).collect::<Vec<_>>());
    let rew = bytes(&(0..n).map(|_| rnd()).collect::<Vec<_>>());
    let term = vec![0u8; n];
    let trunc: Vec<u8> = (0..n).map(|i| u8::from(i % 1000 == 999)).collect();
    let (so, sa, sn) = ([n, OBS], [n, ACT], [n]);
    let arr = |dtype, shape: &'static [usize], data: &'static [u8]| Array { dtype, shape, data };
    let leak = |v: Vec<u8>| -> &'static [u8] { Box::leak(v.into_boxed_slice()) };
    let shape = |s: &[usize]| -> &'static [usize] { Box::leak(s.to_vec().into_boxed_slice()) };
    let s = Steps {
        obs: Obs::Array(arr(DType::F32, shape(&so), leak(obs))),
        act: arr(DType::F32, shape(&sa), leak(act)),
        rew: arr(DType::F32, shape(&sn), leak(rew)),
        terminated: arr(DType::U8, shape(&sn), leak(term)),
        truncated: arr(DType::U8, shape(&sn), leak(trunc)),
        obs_next: Obs::Array(arr(DType::F32, shape(&so), leak(obs_next))),
        extras: &[],
        mask: None,
        env_ids: None,
    };
    core.extend(&s)?;
    Ok(core)
}

/// The suite's HER shapes (`benches/suite/conftest.py`): observation 10, goals 3 (float64),
/// act 4 (float32), 50-step truncated episodes, future_k 4, threshold 0.05.
const HER_OBS: usize = 10;
const HER_GOAL: usize = 3;
const HER_ACT: usize = 4;
const HER_EP: usize = 50;

/// A HER core (native reward) of capacity `cap` holding 2,000 episodes of 50 steps (100k
/// transitions), as the suite's: at 100k the ring has wrapped, at 1M it is a tenth full.
fn filled_her(cap: usize) -> Result<ReplayCore> {
    let mut core = ReplayCore::new(cap, 1, 0)?;
    core.enable_her(HerConfig {
        strategy: GoalStrategy::Future,
        future_k: 4.0,
        distance_threshold: Some(0.05),
        achieved_goal: "achieved_goal".into(),
        desired_goal: "desired_goal".into(),
        finished_only: false,
        exact_ratio: false,
    })?;
    let episodes = 2_000;
    let n = episodes * HER_EP;
    let mut x = XorShift(7);
    let mut rnd = || (x.next() >> 11) as f64 / (1u64 << 53) as f64;
    let leak = |v: Vec<u8>| -> &'static [u8] { Box::leak(v.into_boxed_slice()) };
    let f64s = |v: Vec<f64>| leak(v.iter().flat_map(|f| f.to_ne_bytes()).collect());
    let f32s = |v: Vec<f32>| leak(v.iter().flat_map(|f| f.to_ne_bytes()).collect());
    // per episode: HER_EP + 1 observations; obs are steps 0..HER_EP, obs_next steps 1..=HER_EP
    let mut cols = [
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    ];
    for _ in 0..episodes {
        let goal: Vec<f64> = (0..HER_GOAL).map(|_| rnd() * 0.3).collect();
        let o: Vec<Vec<f64>> = (0..=HER_EP)
            .map(|_| (0..HER_OBS).map(|_| rnd()).collect())
            .collect();
        let ag: Vec<Vec<f64>> = (0..=HER_EP)
            .map(|_| (0..HER_GOAL).map(|_| rnd() * 0.3).collect())
            .collect();
        for t in 0..HER_EP {
            cols[0].extend_from_slice(&o[t]);
            cols[1].extend_from_slice(&ag[t]);
            cols[2].extend_from_slice(&goal);
            cols[3].extend_from_slice(&o[t + 1]);
            cols[4].extend_from_slice(&ag[t + 1]);
            cols[5].extend_from_slice(&goal);
        }
    }
    let [o, ag, dg, on, agn, dgn] = cols.map(f64s);
    let shape = |s: &[usize]| -> &'static [usize] { Box::leak(s.to_vec().into_boxed_slice()) };
    let (so, sg, sn) = (shape(&[n, HER_OBS]), shape(&[n, HER_GOAL]), shape(&[n]));
    let arr = |dtype, shape, data| Array { dtype, shape, data };
    let dict = |o, ag, dg| -> &'static [(&'static str, Array<'static>)] {
        Box::leak(
            vec![
                ("observation", arr(DType::F64, so, o)),
                ("achieved_goal", arr(DType::F64, sg, ag)),
                ("desired_goal", arr(DType::F64, sg, dg)),
            ]
            .into_boxed_slice(),
        )
    };
    let act = f32s((0..n * HER_ACT).map(|_| rnd() as f32).collect());
    let rew = f32s(vec![-1.0; n]);
    let trunc: &'static [u8] = Box::leak(
        (0..n)
            .map(|i| u8::from(i % HER_EP == HER_EP - 1))
            .collect::<Vec<u8>>()
            .into_boxed_slice(),
    );
    let term: &'static [u8] = Box::leak(vec![0u8; n].into_boxed_slice());
    core.extend(&Steps {
        obs: Obs::Dict(dict(o, ag, dg)),
        act: arr(DType::F32, shape(&[n, HER_ACT]), act),
        rew: arr(DType::F32, sn, rew),
        terminated: arr(DType::U8, sn, term),
        truncated: arr(DType::U8, sn, trunc),
        obs_next: Obs::Dict(dict(on, agn, dgn)),
        extras: &[],
        mask: None,
        env_ids: None,
    })?;
    Ok(core)
}

/// Output arrays for any core's batch fields (aligned words, one array per field).
struct AnyOut(Vec<(usize, Vec<u64>)>);

impl AnyOut {
    fn new(core: &ReplayCore) -> Self {
        AnyOut(
            core.batch_fields()
                .map(|f| {
                    let n = B * f.item_bytes();
                    (n, vec![0u64; n.div_ceil(8)])
                })
                .collect(),
        )
    }
    fn batch(&mut self, core: &ReplayCore) -> Result<BatchOut<'_>> {
        let slices = self.0.iter_mut().map(|(n, v)| {
            // SAFETY: u64 words viewed as bytes (plain data)
            let s =
                unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, v.len() * 8) };
            &mut s[..*n]
        });
        BatchOut::from_fields(core.batch_fields().zip(slices))
    }
}

struct Out {
    obs: Vec<u64>,
    obs_next: Vec<u64>,
    act: Vec<u64>,
    rew: Vec<f32>,
    term: Vec<u8>,
    trunc: Vec<u8>,
    disc: Vec<f32>,
    idx: Vec<i64>,
    w: Vec<f32>,
}

impl Out {
    fn new() -> Self {
        let words = |bytes: usize| vec![0u64; bytes.div_ceil(8)];
        Out {
            obs: words(B * OBS * 4),
            obs_next: words(B * OBS * 4),
            act: words(B * ACT * 4),
            rew: vec![0.0; B],
            term: vec![0; B],
            trunc: vec![0; B],
            disc: vec![0.0; B],
            idx: vec![0; B],
            w: vec![0.0; B],
        }
    }
    fn batch(&mut self, per: bool) -> BatchOut<'_> {
        let b = |v: &mut Vec<u64>, n: usize| -> &mut [u8] {
            // SAFETY: u64 words viewed as bytes (plain data)
            let s =
                unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, v.len() * 8) };
            &mut s[..n]
        };
        BatchOut {
            obs: vec![b(&mut self.obs, B * OBS * 4)],
            obs_next: vec![b(&mut self.obs_next, B * OBS * 4)],
            step: vec![b(&mut self.act, B * ACT * 4)],
            rew: &mut self.rew,
            terminated: &mut self.term,
            truncated: &mut self.trunc,
            discount: &mut self.disc,
            indices: &mut self.idx,
            weights: if per { Some(&mut self.w[..]) } else { None },
        }
    }
}

/// Seconds of CPU time of this thread (the machine is shared: wall time counts other
/// processes' turns); wall time where that clock is missing.
fn cpu_now() -> f64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into `t`.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9;
        }
    }
    thread_local!(static T0: Instant = Instant::now());
    T0.with(|t0| t0.elapsed().as_secs_f64())
}

/// (median, min, max) µs per call over 15 blocks of 400 calls (or RLCORE_BENCH_CALLS); the first error ends it.
fn time(mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64, f64)> {
    // RLCORE_BENCH_CALLS: calls per block (400), larger to profile one case
    let calls: usize = std::env::var("RLCORE_BENCH_CALLS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(400);
    let mut v = Vec::new();
    for _ in 0..15 {
        let t = cpu_now();
        for _ in 0..calls {
            f()?;
        }
        v.push((cpu_now() - t) * 1e6 / calls as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok((v[7], v[0], v[14]))
}

/// `"{what}(256)"`, or `"{what}(256, n_step=n)"` for n > 1: a case's name in the report.
fn case_name(what: &str, n: usize) -> String {
    if n == 1 {
        format!("{what}(256)")
    } else {
        format!("{what}(256, n_step={n})")
    }
}

fn main() -> Result<()> {
    // optional filters (cargo passes `--bench`): a capacity and a substring of the case names
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let caps: Vec<usize> = match args.first().and_then(|a| a.parse().ok()) {
        Some(c) => vec![c],
        None => vec![10_000, 200_000, 1_000_000],
    };
    let only = args.get(1).cloned().unwrap_or_default();
    for cap in caps {
        let report = |name: &str, (m, lo, hi): (f64, f64, f64)| {
            println!("{cap:>8}  {name:<30} {m:8.2} µs  [{lo:.2}, {hi:.2}]");
        };
        // a filter "=NAME" takes the one case of that exact name
        let want = |name: &str| match only.strip_prefix('=') {
            Some(exact) => name == exact,
            None => name.contains(only.as_str()),
        };
        let mut out = Out::new();
        let mut core = filled(cap, false)?;
        let mut seed = 0u64;
        for n in [1usize, 3] {
            let name = case_name("floor", n);
            if want(&name) {
                report(
                    &name,
                    time(|| {
                        seed += 1;
                        core.floor_gather(B, n, seed, &mut out.batch(false))
                    })?,
                );
            }
            let name = case_name("sample", n);
            if want(&name) {
                report(
                    &name,
                    time(|| core.sample(B, n, 0.99, &mut out.batch(false), None))?,
                );
            }
        }
        if want("PER sample(256) only") || want("PER update(256) only") {
            let mut pcore = filled(cap, true)?;
            let prio: Vec<f64> = (0..B).map(|i| 0.1 + (i % 17) as f64).collect();
            let rows: Vec<i64> = (0..B as i64).map(|i| (i * 7919) % cap as i64).collect();
            pcore.update_priorities(&rows, &prio)?;
            if want("PER sample(256) only") {
                report(
                    "PER sample(256) only",
                    time(|| pcore.sample(B, 1, 0.99, &mut out.batch(true), None))?,
                );
            }
            if want("PER update(256) only") {
                report(
                    "PER update(256) only",
                    time(|| pcore.update_priorities(&rows, &prio).map(|_| ()))?,
                );
            }
        }
        if want("PER sample(256) + update(256)") {
            let mut pcore = filled(cap, true)?;
            let prio: Vec<f64> = (0..B).map(|i| 0.1 + (i % 17) as f64).collect();
            let mut idx = vec![0i64; B];
            report(
                "PER sample(256) + update(256)",
                time(|| {
                    pcore.sample(B, 1, 0.99, &mut out.batch(true), None)?;
                    idx.copy_from_slice(&out.idx);
                    pcore.update_priorities(&idx, &prio).map(|_| ())
                })?,
            );
        }
        let her_cases = [case_name("HER sample", 1), case_name("HER sample", 3)];
        if her_cases.iter().any(|n| want(n)) || want("HER floor") {
            let mut hcore = filled_her(cap)?;
            let mut hout = AnyOut::new(&hcore);
            if want("HER floor") {
                report(
                    "HER floor",
                    time(|| {
                        seed += 1;
                        let mut out = hout.batch(&hcore)?;
                        hcore.floor_gather(B, 1, seed, &mut out)
                    })?,
                );
            }
            for n in [1usize, 3] {
                let name = case_name("HER sample", n);
                if want(&name) {
                    report(
                        &name,
                        time(|| {
                            let mut out = hout.batch(&hcore)?;
                            hcore.sample(B, n, 0.98, &mut out, None)
                        })?,
                    );
                }
            }
        }
        if want("add one transition") || want("extend 1,000 rows") {
            // a chained stream of 1,000-step episodes of one env into the full ring
            let steps: usize = 1000;
            let obs_all: Vec<f32> = (0..(steps + 1) * OBS).map(|i| (i % 97) as f32).collect();
            let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|f| f.to_ne_bytes()).collect() };
            let (obs, obs_next) = (bytes(&obs_all[..steps * OBS]), bytes(&obs_all[OBS..]));
            let act = bytes(&vec![0.5f32; steps * ACT]);
            let rew = bytes(&vec![1.0f32; steps]);
            let term = vec![0u8; steps];
            let trunc: Vec<u8> = (0..steps).map(|i| u8::from(i == steps - 1)).collect();
            let ob = OBS * 4;
            let (so, sa, sn) = ([steps, OBS], [steps, ACT], [steps]);
            if want("add one transition") {
                let mut i = 0usize;
                report(
                    "add one transition",
                    time(|| {
                        let s = Steps {
                            obs: Obs::Array(Array {
                                dtype: DType::F32,
                                shape: &[OBS],
                                data: &obs[i * ob..(i + 1) * ob],
                            }),
                            act: Array {
                                dtype: DType::F32,
                                shape: &[ACT],
                                data: &act[i * ACT * 4..(i + 1) * ACT * 4],
                            },
                            rew: Array {
                                dtype: DType::F32,
                                shape: &[],
                                data: &rew[i * 4..i * 4 + 4],
                            },
                            terminated: Array {
                                dtype: DType::U8,
                                shape: &[],
                                data: &term[i..i + 1],
                            },
                            truncated: Array {
                                dtype: DType::U8,
                                shape: &[],
                                data: &trunc[i..i + 1],
                            },
                            obs_next: Obs::Array(Array {
                                dtype: DType::F32,
                                shape: &[OBS],
                                data: &obs_next[i * ob..(i + 1) * ob],
                            }),
                            extras: &[],
                            mask: None,
                            env_ids: None,
                        };
                        i = (i + 1) % steps;
                        core.add(&s).map(|_| ())
                    })?,
                );
            }
            if want("extend 1,000 rows") {
                let s = Steps {
                    obs: Obs::Array(Array {
                        dtype: DType::F32,
                        shape: &so,
                        data: &obs,
                    }),
                    act: Array {
                        dtype: DType::F32,
                        shape: &sa,
                        data: &act,
                    },
                    rew: Array {
                        dtype: DType::F32,
                        shape: &sn,
                        data: &rew,
                    },
                    terminated: Array {
                        dtype: DType::U8,
                        shape: &sn,
                        data: &term,
                    },
                    truncated: Array {
                        dtype: DType::U8,
                        shape: &sn,
                        data: &trunc,
                    },
                    obs_next: Obs::Array(Array {
                        dtype: DType::F32,
                        shape: &so,
                        data: &obs_next,
                    }),
                    extras: &[],
                    mask: None,
                    env_ids: None,
                };
                report("extend 1,000 rows", time(|| core.extend(&s).map(|_| ()))?);
            }
        }
    }
    Ok(())
}
