//! The result table: markdown on stdout, optionally JSON.

pub struct Row {
    pub scenario: &'static str,
    pub unit: &'static str,
    pub ours: f64,
    pub peer: f64,
    pub higher_is_better: bool,
}

impl Row {
    /// How many times better ours is (> 1: ours wins); `None` when it is
    /// not a number (e.g. 0 / 0).
    fn ratio(&self) -> Option<f64> {
        let r = if self.higher_is_better {
            self.ours / self.peer
        } else {
            self.peer / self.ours
        };
        r.is_finite().then_some(r)
    }
}

/// Small values (ratios, fairness) with two decimals, the rest whole.
fn value(v: f64) -> String {
    if v.abs() < 10.0 && v.fract() != 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

pub fn print(title: &str, rows: &[Row], json: Option<&str>) {
    println!("{title}");
    println!("| scenario | unit | ours | rslock | ratio (>1: ours better) |");
    println!("|---|---|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.scenario,
            r.unit,
            value(r.ours),
            value(r.peer),
            r.ratio().map_or("-".to_owned(), |r| format!("{r:.2}"))
        );
    }
    if let Some(path) = json {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"scenario\": \"{}\", \"unit\": \"{}\", \"ours\": {:.3}, \"peer\": {:.3}, \"ratio\": {}}}",
                    r.scenario,
                    r.unit,
                    r.ours,
                    r.peer,
                    r.ratio().map_or("null".to_owned(), |r| format!("{r:.3}"))
                )
            })
            .collect();
        std::fs::write(path, format!("[\n{}\n]\n", body.join(",\n"))).expect("write json");
        println!("wrote {path}");
    }
}
