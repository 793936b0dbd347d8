import { x } from "y";

export interface Shape {
  area(): number;
  name: string;
}

export type Id = string | number;

export enum Color {
  Red,
  Green,
}

namespace Geo.Util {
  export function dist(a: number, b: number): number {
    return a - b;
  }
}

export abstract class Base<T> implements Shape {
  private readonly cache = new Map<string, T>();
  abstract area(): number;
  constructor(public name: string) {}
  protected log = (msg: string): void => {
    console.log(msg);
  };
  get size(): number {
    return 0;
  }
}

declare function ext(a: string): void;
export const handler = async (req: Request): Promise<void> => {};
declare module "foo" {
  export function bar(): void;
}
