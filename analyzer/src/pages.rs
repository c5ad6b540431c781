//! A column chunk's page headers, checked before polars decodes the pages.
//!
//! polars-parquet trusts the counts in page headers: a damaged `num_values` that
//! reads as negative becomes a 2^61-byte validity bitmap, an allocation that fails
//! and aborts the process, and an abort, unlike a panic, cannot be caught. So every
//! count a header holds is checked against the row group's rows, and every size
//! against the bytes that are there, before polars sees the chunk.

use polars_parquet_format::thrift::protocol::TCompactInputProtocol;
use polars_parquet_format::{PageHeader, PageType};
use std::ops::Range;

/// Checks one column chunk of a flat column: at `range` in `file`, `values` values
/// (the footer's count) in a row group of `rows` rows. The reason is one line.
pub(crate) fn check_chunk(
    file: &[u8],
    range: Range<u64>,
    values: i64,
    rows: usize,
) -> Result<(), String> {
    let outside = || {
        format!(
            "its pages (bytes {}..{}) lie outside the file ({} bytes)",
            range.start,
            range.end,
            file.len()
        )
    };
    let start = usize::try_from(range.start).map_err(|_| outside())?;
    let end = usize::try_from(range.end).map_err(|_| outside())?;
    let mut data = file.get(start..end).ok_or_else(outside)?;
    // A flat column has one value, null or not, per row.
    if usize::try_from(values).ok() != Some(rows) {
        return Err(format!("{values} values in a row group of {rows} rows"));
    }
    let count = |n: i32, what: &str| {
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= rows)
            .ok_or_else(|| format!("a page holds {n} {what} in a row group of {rows} rows"))
    };
    let mut seen = 0usize;
    while seen < rows {
        let max = data.len();
        let header =
            PageHeader::read_from_in_protocol(&mut TCompactInputProtocol::new(&mut data, max))
                .map_err(|e| format!("a page header does not read ({e})"))?;
        let size = usize::try_from(header.compressed_page_size)
            .ok()
            .filter(|s| *s <= data.len())
            .ok_or_else(|| {
                format!(
                    "a page of {} bytes where {} are left",
                    header.compressed_page_size,
                    data.len()
                )
            })?;
        if header.uncompressed_page_size < 0 {
            return Err(format!(
                "a page of {} bytes uncompressed",
                header.uncompressed_page_size
            ));
        }
        let missing = |what: &str| format!("a {what} page without its header");
        match header.type_ {
            PageType::DATA_PAGE => {
                let h = header.data_page_header.ok_or_else(|| missing("data"))?;
                seen = seen.saturating_add(count(h.num_values, "values")?);
            }
            PageType::DATA_PAGE_V2 => {
                let h = header.data_page_header_v2.ok_or_else(|| missing("data"))?;
                seen = seen.saturating_add(count(h.num_values, "values")?);
                count(h.num_nulls, "nulls")?;
                count(h.num_rows, "rows")?;
                let levels = i64::from(h.definition_levels_byte_length)
                    + i64::from(h.repetition_levels_byte_length);
                if h.definition_levels_byte_length < 0
                    || h.repetition_levels_byte_length < 0
                    || levels > size as i64
                {
                    return Err(format!(
                        "a page whose levels take {levels} of its {size} bytes"
                    ));
                }
            }
            PageType::DICTIONARY_PAGE => {
                let h = header
                    .dictionary_page_header
                    .ok_or_else(|| missing("dictionary"))?;
                // A dictionary holds the distinct values of its chunk.
                count(h.num_values, "dictionary entries")?;
            }
            _ => {}
        }
        data = &data[size..];
    }
    if seen > rows {
        return Err(format!(
            "pages hold {seen} values in a row group of {rows} rows"
        ));
    }
    Ok(())
}
