//! Planning textures as shared 2-D images, for devices that cannot make an image over a
//! buffer (PoCL): there a texture cannot take bytes of an arena, so textures are packed into
//! image slots instead. A slot is reused by a later texture only if it is free for the
//! texture's whole lifetime and covers it (at least as wide and as high, same texel size);
//! among those the smallest slot wins (best fit); otherwise a new slot of exactly the
//! request's size is made. Requests are served in order of their first step.

/// A texture to place: its image size in texels and its inclusive lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRequest {
    pub width: u64,
    pub height: u64,
    pub bytes_per_texel: u64,
    pub first: u32,
    pub last: u32,
}

/// One shared image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSlot {
    pub width: u64,
    pub height: u64,
    pub bytes_per_texel: u64,
}

impl ImageSlot {
    /// Dense bytes of the image (`width · height · bytes_per_texel`).
    pub fn bytes(&self) -> u64 {
        self.width.saturating_mul(self.height).saturating_mul(self.bytes_per_texel)
    }
}

/// The slot of every request, and the slots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImagePlan {
    pub slot_of: Vec<usize>,
    pub slots: Vec<ImageSlot>,
}

impl ImagePlan {
    /// Bytes of all slots.
    pub fn bytes(&self) -> u64 {
        self.slots.iter().fold(0u64, |acc, s| acc.saturating_add(s.bytes()))
    }
}

/// Assigns every request a slot (see the module comment).
pub fn plan_images(reqs: &[ImageRequest]) -> ImagePlan {
    let mut order: Vec<usize> = (0..reqs.len()).collect();
    // By first step; at one step the larger image first, so it is not fitted into a slot a
    // smaller one could have used.
    order.sort_by_key(|&i| (reqs[i].first, std::cmp::Reverse(reqs[i].width * reqs[i].height), i));
    let mut plan = ImagePlan { slot_of: vec![0; reqs.len()], slots: Vec::new() };
    // The last step each slot is busy.
    let mut busy_until: Vec<u32> = Vec::new();
    for i in order {
        let r = &reqs[i];
        let fit = plan
            .slots
            .iter()
            .enumerate()
            .filter(|&(k, s)| {
                busy_until[k] < r.first
                    && s.width >= r.width
                    && s.height >= r.height
                    && s.bytes_per_texel == r.bytes_per_texel
            })
            .min_by_key(|&(k, s)| (s.bytes(), k))
            .map(|(k, _)| k);
        let k = fit.unwrap_or_else(|| {
            plan.slots.push(ImageSlot { width: r.width, height: r.height, bytes_per_texel: r.bytes_per_texel });
            busy_until.push(0);
            plan.slots.len() - 1
        });
        busy_until[k] = r.last;
        plan.slot_of[i] = k;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(width: u64, height: u64, first: u32, last: u32) -> ImageRequest {
        ImageRequest { width, height, bytes_per_texel: 16, first, last }
    }

    #[test]
    fn slots_are_reused_only_where_they_cover_and_best_fit_wins() {
        let reqs = [
            req(8, 8, 0, 1),  // slot 0
            req(16, 4, 0, 2), // slot 1 (a is busy)
            req(4, 4, 2, 3),  // fits 0 (8x8), not 1 (busy): slot 0
            req(8, 16, 3, 4), // covered by neither (0 too low, 1 too narrow): slot 2
            req(16, 2, 4, 5), // fits 1 (16x4) only: slot 1
            req(2, 2, 5, 6),  // free: 0 (8x8 = 1 KiB) and 2 (8x16): best fit 0
        ];
        let p = plan_images(&reqs);
        assert_eq!(p.slot_of, [0, 1, 0, 2, 1, 0]);
        assert_eq!(p.slots.len(), 3);
        assert_eq!(p.bytes(), (64 + 64 + 128) * 16);
        // No two requests of one slot are live at the same time, and each slot covers them.
        for (i, a) in reqs.iter().enumerate() {
            let s = p.slots[p.slot_of[i]];
            assert!(s.width >= a.width && s.height >= a.height);
            for (j, b) in reqs.iter().enumerate().skip(i + 1) {
                if p.slot_of[i] == p.slot_of[j] {
                    assert!(a.last < b.first || b.last < a.first, "{i} and {j} share a slot while live");
                }
            }
        }
    }

    #[test]
    fn texel_sizes_do_not_mix() {
        let mut half = req(4, 4, 2, 2);
        half.bytes_per_texel = 8;
        let p = plan_images(&[req(8, 8, 0, 0), half]);
        assert_eq!(p.slots.len(), 2);
    }
}
