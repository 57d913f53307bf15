//! `Frac`: a position as a fraction of a row's width or a column's
//! height, as the layout records it (each UI turns it into pixels).

use crate::error::{Reject, Result};
use serde::{Deserialize, Serialize};

/// A position as a fraction: `Frac::ONE` (1,000,000) is the whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Frac(pub u32);

impl Frac {
    pub const ZERO: Frac = Frac(0);
    pub const ONE: Frac = Frac(1_000_000);

    pub(crate) fn check(self) -> Result<Frac> {
        match self <= Frac::ONE {
            true => Ok(self),
            false => Err(Reject::Fraction(self.0)),
        }
    }
}
