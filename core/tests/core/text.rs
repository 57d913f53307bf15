//! `Text` against a plain vector of runes: random splices, mostly next to
//! the one before (as typing is), some far away, some long enough to go
//! straight to the rope, and reads at random moments (a read builds the
//! merged rope, which the next edit carries on from). The removed runes,
//! the text, its length and its encoding must match after every step.

use apex_core::text::Text;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// Splice near the last edit: `back` runes before it, `del` runes.
    Near { back: usize, del: usize, text: String },
    /// Splice at a fraction of the text.
    Far { at: f64, del: usize, text: String },
    /// Read the whole text.
    Read,
}

fn step() -> impl Strategy<Value = Step> {
    let text = prop_oneof![
        4 => "[a-c\né€]{0,3}",
        1 => "[x😀]{0,40}",
        1 => "[y]{1000,1100}",
    ];
    prop_oneof![
        6 => (0usize..4, 0usize..3, text.clone()).prop_map(|(back, del, text)| Step::Near { back, del, text }),
        2 => (0.0f64..=1.0, 0usize..6, text).prop_map(|(at, del, text)| Step::Far { at, del, text }),
        1 => Just(Step::Read),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn text_splices_like_a_vector_of_runes(start in "[a-dé\n]{0,30}", steps in prop::collection::vec(step(), 1..80)) {
        let mut text = Text::from(start.as_str());
        let mut want: Vec<char> = start.chars().collect();
        let mut last = 0usize;
        for s in steps {
            let (q0, del, ins) = match s {
                Step::Read => {
                    prop_assert_eq!(text.to_string(), want.iter().collect::<String>());
                    continue;
                }
                Step::Near { back, del, text } => (last.saturating_sub(back).min(want.len()), del, text),
                Step::Far { at, del, text } => (((want.len() as f64) * at) as usize, del, text),
            };
            let q1 = (q0 + del).min(want.len());
            let removed = text.splice(q0, q1, &ins);
            let gone: String = want.splice(q0..q1, ins.chars()).collect();
            prop_assert_eq!(removed, gone);
            prop_assert_eq!(text.len_chars(), want.len());
            last = q0 + ins.chars().count();
        }
        let flat: String = want.iter().collect();
        prop_assert_eq!(text.to_string(), flat.clone());
        let encoded = postcard::to_allocvec(&text).unwrap();
        prop_assert_eq!(&encoded, &postcard::to_allocvec(&Text::from(flat.as_str())).unwrap());
        let back: Text = postcard::from_bytes(&encoded).unwrap();
        prop_assert!(back == text);
    }
}
