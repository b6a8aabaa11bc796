//! The compact state kept from watches, with the reverse index. Filled in by issue 2/4 work.
