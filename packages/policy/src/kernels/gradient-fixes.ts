/**
 * Gradient fixes installed on every backend (only faster, never different): the
 * `BatchMatMul` gradient re-registered with explicit transposes, since wasm hands a matmul
 * to XNNPACK only without transpose flags (flags run 10-40× slower).
 */
import * as tf from "@tensorflow/tfjs-core";

let gradientFixesInstalled = false;
/** Re-registers the `BatchMatMul` gradient with explicit transposes (no transpose flags). */
export function installGradientFixes(): void {
  // Must run after ./vendor/tfjs-gradients.js (imported above) so that this registration wins.
  if (gradientFixesInstalled) return;
  gradientFixesInstalled = true;
  const transposeLast = (t: tf.Tensor) => {
    const axes = t.shape.map((_, i) => i);
    [axes[axes.length - 1], axes[axes.length - 2]] = [axes[axes.length - 2], axes[axes.length - 1]];
    return tf.transpose(t, axes);
  };
  const matMul = (a: tf.Tensor, b: tf.Tensor) => tf.matMul(a, b);
  const silenceOverrideWarning = console.warn;
  console.warn = () => {};
  try {
    tf.registerGradient({
      kernelName: "BatchMatMul",
      inputsToSave: ["a", "b"],
      gradFunc: (dy, saved, attrs) => {
        const [a, b] = saved;
        const { transposeA, transposeB } = attrs as unknown as {
          transposeA: boolean;
          transposeB: boolean;
        };
        const gradient = dy as tf.Tensor;
        let gradA: tf.Tensor;
        let gradB: tf.Tensor;
        if (!transposeA && !transposeB) {
          gradA = matMul(gradient, transposeLast(b));
          gradB = matMul(transposeLast(a), gradient);
        } else if (!transposeA && transposeB) {
          gradA = matMul(gradient, b);
          gradB = matMul(transposeLast(gradient), a);
        } else if (transposeA && !transposeB) {
          gradA = matMul(b, transposeLast(gradient));
          gradB = matMul(a, gradient);
        } else {
          gradA = matMul(transposeLast(b), transposeLast(gradient));
          gradB = matMul(transposeLast(gradient), transposeLast(a));
        }
        return { a: () => reduceToShape(gradA, a.shape), b: () => reduceToShape(gradB, b.shape) };
      },
    });
  } finally {
    console.warn = silenceOverrideWarning;
  }
}

/** Sums a broadcast gradient back to the input's batch shape. */
function reduceToShape(gradient: tf.Tensor, shape: number[]): tf.Tensor {
  if (gradient.shape.length === shape.length && gradient.shape.every((d, i) => d === shape[i]))
    return gradient;
  const extra = gradient.rank - shape.length;
  let reduced = extra > 0 ? tf.sum(gradient, [...Array(extra).keys()]) : gradient;
  const broadcastAxes = shape
    .map((d, i) => (d === 1 && reduced.shape[i] !== 1 ? i : -1))
    .filter((i) => i >= 0);
  if (broadcastAxes.length > 0) reduced = tf.sum(reduced, broadcastAxes, true);
  return tf.reshape(reduced, shape);
}
