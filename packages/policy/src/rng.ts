/**
 * A small seedable PRNG (xoshiro128**, 128-bit state) whose state can be saved and
 * restored, so that sampling is reproducible across checkpoints.
 */
export type RngState = [number, number, number, number];

export class Rng {
  private state: Uint32Array;

  /** seed: any integer; the state is expanded from it with splitmix32. */
  constructor(seed = 0) {
    this.state = new Uint32Array(4);
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.state[i] = (z ^ (z >>> 16)) >>> 0;
    }
    if (this.state.every((v) => v === 0)) this.state[0] = 1;
  }

  static fromState(state: RngState): Rng {
    const rng = new Rng();
    rng.setState(state);
    return rng;
  }

  getState(): RngState {
    return [this.state[0], this.state[1], this.state[2], this.state[3]];
  }

  setState(state: RngState): void {
    if (state.length !== 4 || state.every((v) => v === 0))
      throw new RangeError("RNG state must be 4 uint32 values, not all zero");
    this.state.set(state.map((v) => v >>> 0));
  }

  /** Next uint32. */
  nextUint32(): number {
    const s = this.state;
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform in [0, 1) with 32 bits of resolution. */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  nextInt(n: number): number {
    return Math.floor(this.next() * n);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
