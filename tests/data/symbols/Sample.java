package com.example;

import java.util.List;

public class Outer {
    private int count;

    public Outer(int count) {
        this.count = count;
    }

    public void run() {
        Runnable r = new Runnable() {
            public void run() {}
        };
    }

    static class Inner {
        void helper() {}
    }

    interface Listener {
        void onEvent(String e);
    }

    enum Mode {
        ON, OFF;
        boolean isOn() { return this == ON; }
    }

    record Pair(int a, int b) {}
}

@interface Marker {}
