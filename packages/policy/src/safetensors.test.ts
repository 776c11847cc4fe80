import { test, describe } from "node:test";
import assert from "node:assert/strict";
import {
  parseSafetensors,
  serializeSafetensors,
  floatToBfloat16,
  floatToHalf,
  SafetensorsError,
} from "./safetensors.js";

describe("safetensors", () => {
  test("F32 round-trips bit-exactly, with 8-byte aligned data and a valid header", () => {
    const data = Float32Array.from([0, -0, 1.5, -2.25, 3.4028234663852886e38, 1e-45, Math.PI]);
    const bytes = serializeSafetensors([
      { name: "a.weight", shape: [7], data },
      { name: "b", shape: [1, 2], data: Float32Array.from([5, 6]) },
    ]);
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    assert.equal((8 + headerLength) % 8, 0);
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    assert.deepEqual(header["a.weight"], { dtype: "F32", shape: [7], data_offsets: [0, 28] });
    const parsed = parseSafetensors(bytes);
    assert.deepEqual(
      new Uint32Array(parsed.get("a.weight")!.data.buffer),
      new Uint32Array(data.buffer),
    );
    assert.deepEqual(parsed.get("b")!.shape, [1, 2]);
  });

  test("BF16 and F16 encode with rounding and decode back", () => {
    assert.equal(floatToBfloat16(1), 0x3f80);
    assert.equal(floatToBfloat16(-2), 0xc000);
    assert.equal(floatToBfloat16(1 + 1 / 256), 0x3f80); // ties to even
    assert.equal(floatToBfloat16(1 + 3 / 256), 0x3f82);
    assert.equal(floatToHalf(1), 0x3c00);
    assert.equal(floatToHalf(-0.5), 0xb800);
    assert.equal(floatToHalf(65504), 0x7bff);
    assert.equal(floatToHalf(1e6), 0x7c00);
    const data = Float32Array.from([1, -0.5, 0.1, 1000, 6.1e-5]);
    for (const dtype of ["BF16", "F16"] as const) {
      const parsed = parseSafetensors(
        serializeSafetensors([{ name: "x", shape: [5], data }], { dtype }),
      ).get("x")!;
      parsed.data.forEach((v, i) =>
        assert.ok(
          Math.abs(v - data[i]) <= Math.abs(data[i]) * (dtype === "BF16" ? 4e-3 : 1e-3),
          `${dtype} ${data[i]} → ${v}`,
        ),
      );
    }
  });

  test("rejects broken files with SafetensorsError", () => {
    assert.throws(() => parseSafetensors(new Uint8Array(4)), SafetensorsError);
    const bytes = serializeSafetensors([
      { name: "x", shape: [2], data: Float32Array.from([1, 2]) },
    ]);
    assert.throws(() => parseSafetensors(bytes.subarray(0, bytes.length - 4)), /offsets/);
    const header = new TextEncoder().encode(
      JSON.stringify({ x: { dtype: "I64", shape: [1], data_offsets: [0, 8] } }),
    );
    const file = new Uint8Array(8 + header.length + 8);
    new DataView(file.buffer).setBigUint64(0, BigInt(header.length), true);
    file.set(header, 8);
    assert.throws(() => parseSafetensors(file), /I64/);
  });
});
