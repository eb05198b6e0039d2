//! The scoreboard's record list: a double-ended queue that keeps one record inline and
//! spills to a `VecDeque` beyond that. A request/response connection has one segment
//! (or one TSO run) in flight at a time and never allocates; a bulk flow allocates when
//! its second record goes out, and gives the memory back when everything is
//! acknowledged, so an idle connection owns none.

use std::collections::VecDeque;

/// See the module docs. Only what the scoreboard uses of `VecDeque`.
#[derive(Clone)]
pub(super) struct Records<T: Copy>(Repr<T>);

#[derive(Clone)]
enum Repr<T: Copy> {
    /// No record (one tag to write or test: the request/response case empties and
    /// refills the list once per exchange).
    Empty,
    /// Exactly one record.
    One(T),
    /// More than one, or the storage of more than one with fewer left (emptied, it
    /// goes: the list is `Empty` again).
    Many(VecDeque<T>),
}

impl<T: Copy> Default for Records<T> {
    fn default() -> Self {
        Records::EMPTY
    }
}

impl<T: Copy> Records<T> {
    /// No record.
    pub(super) const EMPTY: Records<T> = Records(Repr::Empty);

    pub(super) fn len(&self) -> usize {
        match &self.0 {
            Repr::Empty => 0,
            Repr::One(_) => 1,
            Repr::Many(v) => v.len(),
        }
    }

    pub(super) fn front(&self) -> Option<&T> {
        match &self.0 {
            Repr::Empty => None,
            Repr::One(x) => Some(x),
            Repr::Many(v) => v.front(),
        }
    }

    pub(super) fn back(&self) -> Option<&T> {
        match &self.0 {
            Repr::Empty => None,
            Repr::One(x) => Some(x),
            Repr::Many(v) => v.back(),
        }
    }

    /// Append `x`. The first record (the request/response case) is stored inline
    /// here; a list that grows goes through [`push_back_more`](Self::push_back_more).
    #[inline]
    pub(super) fn push_back(&mut self, x: T) {
        match self.0 {
            Repr::Empty => self.0 = Repr::One(x),
            _ => self.push_back_more(x),
        }
    }

    #[inline(never)]
    fn push_back_more(&mut self, x: T) {
        match &mut self.0 {
            Repr::Empty => self.0 = Repr::One(x),
            Repr::Many(v) => v.push_back(x),
            Repr::One(first) => self.0 = Repr::Many(Self::spill([*first, x])),
        }
    }

    /// The storage for more than one record.
    fn spill(pair: [T; 2]) -> VecDeque<T> {
        let mut v = VecDeque::with_capacity(4);
        v.extend(pair);
        v
    }

    /// Remove the first record; the last one leaving frees the storage.
    #[inline]
    pub(super) fn pop_front(&mut self) -> Option<T> {
        match &mut self.0 {
            Repr::Empty => None,
            Repr::One(x) => {
                let x = *x;
                self.0 = Repr::Empty;
                Some(x)
            }
            Repr::Many(v) => {
                let x = v.pop_front();
                if v.is_empty() {
                    self.0 = Repr::Empty;
                }
                x
            }
        }
    }

    /// The record, when there is exactly one and it is the one kept inline.
    #[inline]
    pub(super) fn only(&self) -> Option<T> {
        match &self.0 {
            Repr::One(x) => Some(*x),
            Repr::Empty | Repr::Many(_) => None,
        }
    }

    /// Remove the one inline record (after [`only`](Self::only) returned it).
    #[inline]
    pub(super) fn take_only(&mut self) {
        debug_assert!(matches!(self.0, Repr::One(_)));
        self.0 = Repr::Empty;
    }

    /// Insert `x` before index `i` (at most the length).
    pub(super) fn insert(&mut self, i: usize, x: T) {
        match &mut self.0 {
            Repr::Empty => self.0 = Repr::One(x),
            Repr::One(first) => {
                let first = *first;
                let pair = if i == 0 { [x, first] } else { [first, x] };
                self.0 = Repr::Many(Self::spill(pair));
            }
            Repr::Many(v) => v.insert(i, x),
        }
    }

    /// The records as (up to) two slices, in order.
    fn as_slices(&self) -> (&[T], &[T]) {
        match &self.0 {
            Repr::Empty => (&[], &[]),
            Repr::One(x) => (std::slice::from_ref(x), &[]),
            Repr::Many(v) => v.as_slices(),
        }
    }

    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        let (a, b) = self.as_slices();
        a.iter().chain(b)
    }

    pub(super) fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> {
        let (a, b) = match &mut self.0 {
            Repr::Empty => (&mut [][..], &mut [][..]),
            Repr::One(x) => (std::slice::from_mut(x), &mut [][..]),
            Repr::Many(v) => v.as_mut_slices(),
        };
        a.iter_mut().chain(b)
    }

    /// The index of the first record for which `pred` is false, the records being
    /// partitioned by it (all true, then all false).
    pub(super) fn partition_point(&self, pred: impl Fn(&T) -> bool) -> usize {
        let (a, b) = self.as_slices();
        match a.last() {
            Some(last) if pred(last) => a.len() + b.partition_point(pred),
            _ => a.partition_point(pred),
        }
    }
}

impl<T: Copy> std::ops::Index<usize> for Records<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        match &self.0 {
            Repr::Empty => panic!("record {i} of 0"),
            Repr::One(x) if i == 0 => x,
            Repr::One(_) => panic!("record {i} of 1"),
            Repr::Many(v) => &v[i],
        }
    }
}

impl<T: Copy> std::ops::IndexMut<usize> for Records<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        match &mut self.0 {
            Repr::Empty => panic!("record {i} of 0"),
            Repr::One(x) if i == 0 => x,
            Repr::One(_) => panic!("record {i} of 1"),
            Repr::Many(v) => &mut v[i],
        }
    }
}

impl<T: Copy + PartialEq> PartialEq for Records<T> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<T: Copy + Eq> Eq for Records<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        Pop,
        Insert(usize, u32),
        Set(usize, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u32>().prop_map(Op::Push),
            3 => Just(Op::Pop),
            1 => (0usize..8, any::<u32>()).prop_map(|(i, x)| Op::Insert(i, x)),
            1 => (0usize..8, any::<u32>()).prop_map(|(i, x)| Op::Set(i, x)),
        ]
    }

    #[test]
    fn one_record_is_kept_inline_and_the_last_to_leave_frees_the_storage() {
        let mut r = Records::default();
        r.push_back(1u32);
        assert!(matches!(r.0, Repr::One(1)));
        assert_eq!(r.pop_front(), Some(1));
        r.push_back(2);
        r.push_back(3);
        assert!(matches!(&r.0, Repr::Many(v) if v.capacity() > 0));
        r.pop_front();
        r.pop_front();
        assert!(matches!(&r.0, Repr::Empty));
        assert_eq!(r.pop_front(), None);
    }

    proptest! {
        #[test]
        fn behaves_like_a_vecdeque(ops in proptest::collection::vec(op(), 0..64)) {
            let mut r = Records::default();
            let mut model = VecDeque::new();
            // Increasing values only, pushed and popped in step with the others (so its
            // storage wraps too): partitioned by any threshold.
            let mut sorted = Records::default();
            let mut sorted_model = VecDeque::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Push(x) => {
                        r.push_back(x);
                        model.push_back(x);
                        sorted.push_back(n);
                        sorted_model.push_back(n);
                    }
                    Op::Pop => {
                        prop_assert_eq!(r.pop_front(), model.pop_front());
                        prop_assert_eq!(sorted.pop_front(), sorted_model.pop_front());
                    }
                    Op::Insert(i, x) => {
                        let i = i.min(model.len());
                        r.insert(i, x);
                        model.insert(i, x);
                    }
                    Op::Set(i, x) if i < model.len() => {
                        r[i] = x;
                        model[i] = x;
                    }
                    Op::Set(..) => {}
                }
                prop_assert_eq!(r.len(), model.len());
                prop_assert_eq!(r.front(), model.front());
                prop_assert_eq!(r.back(), model.back());
                prop_assert!(r.iter().eq(model.iter()));
                prop_assert!(r.iter().rev().eq(model.iter().rev()));
                for (i, x) in model.iter().enumerate() {
                    prop_assert_eq!(&r[i], x);
                }
                for pivot in [0, n / 2, n, n + 1] {
                    prop_assert_eq!(
                        sorted.partition_point(|&x| x < pivot),
                        sorted_model.partition_point(|&x| x < pivot)
                    );
                }
            }
            for x in r.iter_mut() {
                *x = x.wrapping_add(1);
            }
            prop_assert!(r.iter().eq(model.iter().map(|x| x.wrapping_add(1)).collect::<Vec<_>>().iter()));
        }
    }
}
