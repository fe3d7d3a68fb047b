//! The one worker pool: how many threads a run may use, decided once by the face,
//! and the only place the library starts threads.
//!
//! Work is split once: a caller that hands items to the pool gives each item's own
//! work `Workers::serial()`, so parallel work never nests (files on every core, or
//! one large file's chunks on every core, never both: at most `threads` threads).

use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workers {
    threads: usize,
}

/// Serial: a library caller that gives no pool gets no threads.
impl Default for Workers {
    fn default() -> Workers {
        Workers::serial()
    }
}

impl Workers {
    pub fn new(threads: usize) -> Workers {
        Workers {
            threads: threads.max(1),
        }
    }

    /// One thread per core: what the faces use.
    pub fn per_core() -> Workers {
        Workers::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Everything on the calling thread.
    pub fn serial() -> Workers {
        Workers::new(1)
    }

    pub fn threads(self) -> usize {
        self.threads
    }

    /// `f` over every item, the results in input order.
    pub fn map<T: Sync, R: Send>(self, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        let mut out = Vec::with_capacity(items.len());
        let done: Result<(), std::convert::Infallible> = self.map_in_order(items, f, |r| {
            out.push(r);
            Ok(())
        });
        let Ok(()) = done;
        out
    }

    /// `f` over every item on up to `threads` threads, each result handed to `sink`
    /// in input order as soon as it and those before it are done, so output starts
    /// before the last item is done. Items are taken in order from a shared counter:
    /// a slow item does not hold up the others. The first error of `sink` stops the
    /// run (the threads stop taking items) and is returned.
    pub fn map_in_order<T: Sync, R: Send, E>(
        self,
        items: &[T],
        f: impl Fn(&T) -> R + Sync,
        mut sink: impl FnMut(R) -> Result<(), E>,
    ) -> Result<(), E> {
        let threads = self.threads.min(items.len());
        if threads < 2 {
            return items.iter().try_for_each(|item| sink(f(item)));
        }
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, R)>(threads * 2);
            for _ in 0..threads {
                let (tx, next, f) = (tx.clone(), &next, &f);
                s.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    // A failed send means the sink stopped: stop too.
                    if tx.send((i, f(item))).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            let mut pending = std::collections::BTreeMap::new();
            let mut want = 0;
            for (i, r) in rx {
                pending.insert(i, r);
                while let Some(r) = pending.remove(&want) {
                    sink(r)?;
                    want += 1;
                }
            }
            Ok(())
        })
    }

    /// `consume` reading what `produce` yields, `produce` running ahead on a thread
    /// of its own (at most `ahead` items) when there is a second thread, so that
    /// `consume` rarely waits; on one thread, `produce` is pulled as `consume` reads.
    pub fn read_ahead<T: Send, R>(
        self,
        ahead: usize,
        produce: impl Iterator<Item = T> + Send,
        consume: impl FnOnce(&mut dyn Iterator<Item = T>) -> R,
    ) -> R {
        if self.threads < 2 {
            let mut produce = produce;
            return consume(&mut produce);
        }
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel(ahead);
            s.spawn(move || {
                for item in produce {
                    if tx.send(item).is_err() {
                        break; // `consume` is done
                    }
                }
            });
            consume(&mut rx.into_iter())
        })
    }

    /// Runs `work` on the calling thread, handing it `later`: each value given to
    /// `later` is dropped on another thread while `work` goes on, for values whose
    /// drop waits on a device (a replaced file's last close frees its space, see
    /// `sink::replace_files`). Such drops wait rather than compute, so twice
    /// `threads` threads drop; returns once all are dropped. On one thread a value
    /// is dropped as it is given.
    pub fn drop_behind<T: Send, R>(self, work: impl FnOnce(&mut dyn FnMut(T)) -> R) -> R {
        if self.threads < 2 {
            return work(&mut drop);
        }
        let (tx, rx) = std::sync::mpsc::channel::<T>();
        let rx = std::sync::Mutex::new(rx);
        std::thread::scope(|s| {
            for _ in 0..self.threads * 2 {
                let rx = &rx;
                s.spawn(move || loop {
                    // The lock is held only to take one value; a closed, empty
                    // channel ends the thread.
                    let Ok(value) = rx.lock().map_err(drop).and_then(|r| r.recv().map_err(drop))
                    else {
                        break;
                    };
                    drop(value);
                });
            }
            let r = work(&mut |value| {
                // Only a thread that panicked hangs up: then drop it here.
                if let Err(e) = tx.send(value) {
                    drop(e.0);
                }
            });
            drop(tx);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_input_order_whatever_finishes_first() {
        let items: Vec<u64> = (0..200).collect();
        let out = Workers::new(4).map(&items, |&i| {
            // Early items take longest.
            std::thread::sleep(std::time::Duration::from_micros(200 - i));
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_failing_sink_stops_the_run_with_its_error() {
        let items: Vec<u32> = (0..10_000).collect();
        let taken = AtomicUsize::new(0);
        let mut seen = 0;
        let r = Workers::new(2).map_in_order(
            &items,
            |&i| {
                taken.fetch_add(1, Ordering::Relaxed);
                i
            },
            |i| {
                seen += 1;
                if i == 10 {
                    Err("stop")
                } else {
                    Ok(())
                }
            },
        );
        assert_eq!(r, Err("stop"));
        assert_eq!(seen, 11);
        assert!(taken.load(Ordering::Relaxed) < items.len());
    }

    #[test]
    fn drop_behind_drops_every_value_before_it_returns_and_off_the_calling_thread() {
        struct Counted<'a>(
            &'a AtomicUsize,
            &'a std::sync::Mutex<Vec<std::thread::ThreadId>>,
        );
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                std::thread::sleep(std::time::Duration::from_micros(50));
                self.1.lock().unwrap().push(std::thread::current().id());
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        for threads in [1, 2] {
            let (dropped, on) = (AtomicUsize::new(0), std::sync::Mutex::new(Vec::new()));
            let given = Workers::new(threads).drop_behind(|later| {
                for _ in 0..500 {
                    later(Counted(&dropped, &on));
                }
                500
            });
            assert_eq!(
                dropped.load(Ordering::Relaxed),
                given,
                "{threads} thread(s)"
            );
            let me = std::thread::current().id();
            let here = on.lock().unwrap().iter().filter(|t| **t == me).count();
            match threads {
                1 => assert_eq!(here, 500, "one thread drops as given"),
                _ => assert_eq!(here, 0, "{threads} threads drop off the calling thread"),
            }
        }
    }

    #[test]
    fn read_ahead_yields_everything_in_order_on_one_thread_or_two() {
        for threads in [1, 2] {
            let got = Workers::new(threads).read_ahead(3, 0..100, |it| it.collect::<Vec<_>>());
            assert_eq!(got, (0..100).collect::<Vec<_>>(), "{threads} thread(s)");
        }
    }
}
