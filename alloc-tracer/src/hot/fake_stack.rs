//! A stack of the tests' own for the walks' tests (`trail`, `predict`): frames in
//! a word array, laid out and linked as a real stack's.

/// A stack of the test's own: frames in a word array, outermost at the top.
pub struct FakeStack {
    /// The stack's words.
    pub mem: Vec<usize>,
    /// Word index of each frame, outermost first.
    pub frames: Vec<usize>,
    rng: u64,
}

impl FakeStack {
    pub fn new(seed: u64) -> FakeStack {
        FakeStack {
            mem: vec![0; 1 << 12],
            frames: Vec::new(),
            rng: seed | 1,
        }
    }
    /// A stack of `frames` calls.
    pub fn with_frames(seed: u64, frames: usize) -> FakeStack {
        let mut stack = FakeStack::new(seed);
        for _ in 0..frames {
            stack.call();
        }
        stack
    }
    pub fn rand(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }
    pub fn addr(&self, word: usize) -> usize {
        self.mem.as_ptr() as usize + word * size_of::<usize>()
    }
    pub fn limit(&self) -> usize {
        self.addr(self.mem.len() - 2)
    }
    /// Calls a function: a frame below the innermost one, of 2 to 5 words, from
    /// one of a few call sites (so that equal records recur at equal addresses).
    pub fn call(&mut self) {
        let size = 2 + self.rand(4) as usize;
        let (word, next) = match self.frames.last() {
            Some(&w) => (w - size, self.addr(w)),
            None => (self.mem.len() - 2, 0),
        };
        let ret = 0x1000 + self.rand(3) as usize;
        self.mem[word] = next;
        self.mem[word + 1] = ret;
        self.frames.push(word);
    }
    /// The innermost frame's address.
    pub fn innermost(&self) -> usize {
        self.addr(*self.frames.last().unwrap())
    }
    /// Returns from the innermost function (its words stay, as on a real stack).
    pub fn ret(&mut self) {
        self.frames.pop();
    }
    /// A frame without a frame pointer: its first word is garbage.
    pub fn break_a_frame(&mut self) {
        let pick = self.rand(self.frames.len() as u64 + 1) as usize;
        let (how, up) = (self.rand(3), 1 + self.rand(6) as usize);
        if let Some(&w) = self.frames.get(pick) {
            self.mem[w] = match how {
                0 => 0,
                1 => self.addr(w) - 8,
                _ => self.addr(w + up),
            };
        }
    }
}
