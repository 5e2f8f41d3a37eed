//! "Did you mean …": the closest known name to a misspelt one.

/// The optimal-string-alignment distance between `a` and `b`: insertions,
/// deletions, substitutions and swaps of two neighbours, each costing one.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `input`, if one is close enough to be what was
/// meant: at most a third of its letters (and at least two) away, or one
/// that begins with what was typed (`approval` for `approval-gate`).
pub fn closest<'a, I>(input: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let input_l = input.to_lowercase();
    let limit = (input.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .filter(|c| *c != input)
        .filter_map(|c| {
            let d = distance(&input_l, &c.to_lowercase());
            let prefix = input_l.len() >= 3 && c.to_lowercase().starts_with(&input_l);
            let rank = if prefix { d.min(1) } else { d };
            (d <= limit || prefix).then_some((rank, c))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean "x"?` for the closest candidate, or nothing.
pub fn did_you_mean<'a, I>(input: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    closest(input, candidates)
        .map(|c| format!("; did you mean {c:?}?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits_and_neighbour_swaps() {
        assert_eq!(distance("lose", "lose"), 0);
        assert_eq!(distance("lsoe", "lose"), 1);
        assert_eq!(distance("los", "lose"), 1);
        assert_eq!(distance("loose", "lose"), 1);
        assert_eq!(distance("torn", "lose"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_closest_name_is_suggested_and_far_ones_are_not() {
        let states = ["process", "lose", "entries", "torn", "contents", "in-order"];
        assert_eq!(closest("lsoe", states), Some("lose"));
        assert_eq!(closest("inorder", states), Some("in-order"));
        assert_eq!(closest("entires", states), Some("entries"));
        assert_eq!(closest("power-cut", states), None);
        assert_eq!(
            closest("approval", ["fail-after-accept", "approval-gate"]),
            Some("approval-gate")
        );
        assert_eq!(
            closest("tracker acepted", ["tracker accepted", "mid-save"]),
            Some("tracker accepted")
        );
        assert_eq!(did_you_mean("lsoe", states), "; did you mean \"lose\"?");
        assert_eq!(did_you_mean("zzzzzz", states), "");
    }
}
