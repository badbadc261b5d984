//! A tolerant mode for the lock's `[request]` tables: a serde `Deserializer` wrapper that
//! drops, at every depth, the keys a struct does not name, before the struct sees them.
//!
//! The request's deployment tables are read with the spec's own wire types, which reject
//! unknown keys (a typo in `gpustack.toml` is an error). A lock written by a newer gpustack
//! of the same `version` but a higher `revision` may hold a key a newer spec added
//! (book/src/lockfile.md, "Compatibility"); read through [`Tolerant`], the same wire types
//! skip it, and spans (`toml::Spanned`) still point into the lock's text because the
//! wrapper forwards to the TOML deserializer unchanged.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, IntoDeserializer, MapAccess,
    SeqAccess, Visitor,
};
use serde::Deserialize;

/// Deserializes a `T`, skipping keys that none of its structs name.
pub(super) struct Seed<T>(pub(super) PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Seed<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::deserialize(Tolerant(d))
    }
}

/// The wrapper: every value deserialized through it is tolerant too.
struct Tolerant<D>(D);

/// A seed whose value is deserialized tolerantly.
struct SeedW<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for SeedW<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Tolerant(d))
    }
}

/// A visitor whose maps drop the keys outside `fields` (a struct's; `None` for a map).
struct Wrap<V> {
    v: V,
    fields: Option<&'static [&'static str]>,
}

macro_rules! forward {
    ($($name:ident),*) => {$(
        fn $name<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
            self.0.$name(Wrap { v, fields: None })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Tolerant<D> {
    type Error = D::Error;

    forward!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_unit_struct(name, Wrap { v, fields: None })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_newtype_struct(name, Wrap { v, fields: None })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap { v, fields: None })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_tuple_struct(name, len, Wrap { v, fields: None })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        // `toml::Spanned` is a struct to serde, whose keys the TOML deserializer hands over
        // as borrowed strings: pass it through untouched.
        let filter = (!name.starts_with("$__serde_spanned")).then_some(fields);
        self.0
            .deserialize_struct(name, fields, Wrap { v, fields: filter })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, v)
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! visit {
    ($($name:ident: $t:ty),*) => {$(
        fn $name<E: de::Error>(self, x: $t) -> Result<V::Value, E> {
            self.v.$name(x)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.v.expecting(f)
    }

    visit!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char,
        visit_str: &str,
        visit_borrowed_str: &'de str,
        visit_string: String,
        visit_bytes: &[u8],
        visit_borrowed_bytes: &'de [u8],
        visit_byte_buf: Vec<u8>
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_some(Tolerant(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_newtype_struct(Tolerant(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<V::Value, A::Error> {
        self.v.visit_seq(SeqW(a))
    }

    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<V::Value, A::Error> {
        self.v.visit_map(MapW {
            a,
            fields: self.fields,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, a: A) -> Result<V::Value, A::Error> {
        self.v.visit_enum(a)
    }
}

struct SeqW<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for SeqW<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(SeedW(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

struct MapW<A> {
    a: A,
    fields: Option<&'static [&'static str]>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for MapW<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(fields) = self.fields else {
            return self.a.next_key_seed(seed);
        };
        while let Some(key) = self.a.next_key::<String>()? {
            if fields.contains(&key.as_str()) {
                let d: de::value::StringDeserializer<A::Error> = key.into_deserializer();
                return seed.deserialize(d).map(Some);
            }
            self.a.next_value::<IgnoredAny>()?;
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        self.a.next_value_seed(SeedW(seed))
    }
}

/// The next map value, tolerantly when `tolerant`.
pub(super) fn next_value<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    tolerant: bool,
) -> Result<T, A::Error> {
    if tolerant {
        map.next_value_seed(Seed(PhantomData))
    } else {
        map.next_value()
    }
}
