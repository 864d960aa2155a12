//! The layout of a sampled batch: its fields ([`Field`]), the arrays of a `TransitionBatch`
//! ([`BatchField`], from [`Schema::batch_fields`]) and of a `SequenceBatch` ([`SeqField`]), and
//! what a front end needs to fill either kind from fresh or caller-supplied arrays
//! ([`OutField`], checked by [`crate::validate::out_arrays`]).

use std::borrow::Cow;

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::error::CoreError;
use crate::schema::{obs_key, Schema};

/// A field of a sampled batch, in the order of a `SequenceBatch`; a `TransitionBatch` has the
/// fields of [`TRANSITION_FIELDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Obs,
    Act,
    Rew,
    ObsNext,
    Terminated,
    Truncated,
    Discount,
    Mask,
    IsFirst,
    Horizon,
    Indices,
    StartIndices,
    Weights,
    Extras,
    State,
}

/// The fields of a `TransitionBatch`, in its order.
pub const TRANSITION_FIELDS: &[Field] = &[
    Field::Obs,
    Field::Act,
    Field::Rew,
    Field::ObsNext,
    Field::Terminated,
    Field::Truncated,
    Field::Discount,
    Field::Indices,
    Field::Weights,
    Field::Extras,
];

impl Field {
    /// Every field, in the order of a `SequenceBatch`.
    pub const ALL: [Field; 15] = [
        Field::Obs,
        Field::Act,
        Field::Rew,
        Field::ObsNext,
        Field::Terminated,
        Field::Truncated,
        Field::Discount,
        Field::Mask,
        Field::IsFirst,
        Field::Horizon,
        Field::Indices,
        Field::StartIndices,
        Field::Weights,
        Field::Extras,
        Field::State,
    ];

    /// The field's name in a batch.
    pub fn name(self) -> &'static str {
        match self {
            Field::Obs => "obs",
            Field::Act => "act",
            Field::Rew => "rew",
            Field::ObsNext => "obs_next",
            Field::Terminated => "terminated",
            Field::Truncated => "truncated",
            Field::Discount => "discount",
            Field::Mask => "mask",
            Field::IsFirst => "is_first",
            Field::Horizon => "horizon",
            Field::Indices => "indices",
            Field::StartIndices => "start_indices",
            Field::Weights => "weights",
            Field::Extras => "extras",
            Field::State => "state",
        }
    }

    /// Whether the field is a dict of arrays even when it holds none (`extras`, `state`).
    pub fn always_dict(self) -> bool {
        matches!(self, Field::Extras | Field::State)
    }
}

/// One array of a sampled batch of B samples: dtype and shape `[B, *row_shape]`, and where it
/// goes in a `TransitionBatch`: the field itself, or (`key`) one entry of the field's dict — the
/// observation key of dict observations, the name of an extra.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchField<'a> {
    pub field: Field,
    pub key: Option<&'a str>,
    pub dtype: DType,
    pub row_shape: &'a [usize],
}

impl BatchField<'_> {
    /// Bytes of one sample's row of this array.
    pub fn item_bytes(&self) -> usize {
        self.row_shape.iter().product::<usize>() * self.dtype.size()
    }

    /// How messages name the array: `obs`, `obs['key']`, `act`, an extra's name, `rew`, ...
    pub fn label(&self) -> Cow<'_, str> {
        match (self.field, self.key) {
            (Field::Extras, Some(name)) => Cow::Borrowed(name),
            (f, Some(key)) => Cow::Owned(format!("{}['{key}']", f.name())),
            (f, None) => Cow::Borrowed(f.name()),
        }
    }
}

impl Schema {
    /// The arrays of a sampled batch, in the order a [`crate::BatchOut`] is assembled from:
    /// every observation column (`Obs`), again (`ObsNext`), `act`, the extras, then `rew`,
    /// `terminated`, `truncated`, `discount`, `indices` and, for prioritized buffers,
    /// `weights`.
    pub fn batch_fields(
        &self,
        prioritized: bool,
    ) -> impl Iterator<Item = BatchField<'_>> + Clone + '_ {
        let obs = |field: Field| {
            self.obs.iter().map(move |c| BatchField {
                field,
                key: obs_key(&c.spec.name),
                dtype: c.spec.dtype,
                row_shape: &c.spec.shape,
            })
        };
        let step = self.step.iter().enumerate().map(|(k, c)| BatchField {
            field: if k == 0 { Field::Act } else { Field::Extras },
            key: (k > 0).then_some(c.spec.name.as_str()),
            dtype: c.spec.dtype,
            row_shape: &c.spec.shape,
        });
        let scalars = [
            (Field::Rew, DType::F32),
            (Field::Terminated, DType::Bool),
            (Field::Truncated, DType::Bool),
            (Field::Discount, DType::F32),
            (Field::Indices, DType::I64),
            (Field::Weights, DType::F32),
        ]
        .into_iter()
        .filter(move |(f, _)| prioritized || *f != Field::Weights)
        .map(|(field, dtype)| BatchField {
            field,
            key: None,
            dtype,
            row_shape: &[],
        });
        obs(Field::Obs)
            .chain(obs(Field::ObsNext))
            .chain(step)
            .chain(scalars)
    }
}

/// One array of a sampled sequence batch: its field, its key inside the field's dict (the
/// observation key of dict observations, an extra's name), dtype and full shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqField {
    pub slot: Field,
    pub key: Option<String>,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl SeqField {
    /// Bytes of the whole array.
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
    /// How messages name the array: `obs`, `obs['key']`, `extras['h']`, `rew`, ...
    pub fn label(&self) -> String {
        match &self.key {
            Some(k) => format!("{}['{k}']", self.slot.name()),
            None => self.slot.name().to_string(),
        }
    }
}

/// One output array of a sampled batch as a front end sees it: where it goes (field, key in
/// the field's dict), its dtype and shape, how messages name it. Implemented by the arrays of a
/// `TransitionBatch` of B samples (`(B, BatchField)`) and of a `SequenceBatch` ([`SeqField`]).
pub trait OutField {
    /// The fields of this kind of batch, in the order of its tuple.
    const FIELDS: &'static [Field];
    fn field(&self) -> Field;
    fn key(&self) -> Option<&str>;
    fn dtype(&self) -> DType;
    /// Its shape: `lead` dimensions, then `row` dimensions.
    fn dims(&self) -> (&[usize], &[usize]);
    fn label(&self) -> Cow<'_, str>;
    /// The error for an `out` batch (of type `out_type`) without this array; `key_of`: the
    /// type of its field, found without the key.
    fn missing(&self, out_type: &str, key_of: Option<&str>) -> CoreError;

    fn shape(&self) -> SmallVec<[usize; 4]> {
        let (lead, row) = self.dims();
        lead.iter().chain(row).copied().collect()
    }
    fn bytes(&self) -> usize {
        let (lead, row) = self.dims();
        lead.iter().chain(row).product::<usize>() * self.dtype().size()
    }
}

impl OutField for (usize, BatchField<'_>) {
    const FIELDS: &'static [Field] = TRANSITION_FIELDS;
    fn field(&self) -> Field {
        self.1.field
    }
    fn key(&self) -> Option<&str> {
        self.1.key
    }
    fn dtype(&self) -> DType {
        self.1.dtype
    }
    fn dims(&self) -> (&[usize], &[usize]) {
        (std::slice::from_ref(&self.0), self.1.row_shape)
    }
    fn label(&self) -> Cow<'_, str> {
        self.1.label()
    }
    fn missing(&self, out_type: &str, key_of: Option<&str>) -> CoreError {
        let name = self.1.field.name();
        CoreError::usage(match (self.1.key, key_of) {
            (Some(key), Some(t)) => format!(
                "out.{name} has no array '{key}' ({t}); pass a TransitionBatch from a previous \
                 sample of this buffer"
            ),
            _ => format!(
                "out must be a TransitionBatch (from a previous sample of this buffer); it has \
                 no field '{name}' ({out_type})"
            ),
        })
    }
}

impl OutField for SeqField {
    const FIELDS: &'static [Field] = &Field::ALL;
    fn field(&self) -> Field {
        self.slot
    }
    fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn dims(&self) -> (&[usize], &[usize]) {
        (&self.shape, &[])
    }
    fn label(&self) -> Cow<'_, str> {
        Cow::Owned(SeqField::label(self))
    }
    fn missing(&self, out_type: &str, _: Option<&str>) -> CoreError {
        CoreError::usage(format!(
            "out must be a SequenceBatch from a previous sample_sequences of this buffer with \
             the same arguments; it has no array {} ({out_type})",
            SeqField::label(self)
        ))
    }
}
