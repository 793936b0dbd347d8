use std::fmt;

pub const MAX: usize = 10;
static COUNTER: u32 = 0;

/// A point.
#[derive(Debug)]
pub struct Point<T> {
    x: T,
    y: T,
}

pub enum Shape {
    Circle(f64),
    Square(f64),
}

pub trait Area {
    fn area(&self) -> f64;
    fn describe(&self) -> String {
        String::from("shape")
    }
}

impl<T: Copy> Point<T> {
    pub fn new(x: T, y: T) -> Self {
        Point { x, y }
    }
}

impl fmt::Display for Point<f64> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}

pub mod geo {
    pub fn helper() {}

    pub struct Line;

    impl super::Area for Line {
        fn area(&self) -> f64 {
            fn inner() {}
            0.0
        }
    }
}

macro_rules! square {
    ($x:expr) => { $x * $x };
}

type Pair = (i32, i32);

fn main() {}
