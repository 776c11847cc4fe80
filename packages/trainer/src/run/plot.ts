/**
 * A dependency-free SVG line chart: one line per series (e.g. success per task over steps).
 */

export interface Series {
  name: string;
  points: { x: number; y: number }[];
}

const COLORS = [
  "#1f77b4",
  "#d62728",
  "#2ca02c",
  "#ff7f0e",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#17becf",
];

function escapeXml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** Renders the series as an SVG document. The y range is [0, 1] unless a value leaves it. */
export function lineChartSvg(
  series: Series[],
  options: { title: string; xLabel: string; yLabel: string; width?: number; height?: number },
): string {
  const width = options.width ?? 720;
  const height = options.height ?? 400;
  const margin = { left: 56, right: 150, top: 36, bottom: 44 };
  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  const all = series.flatMap((s) => s.points);
  const xMin = Math.min(0, ...all.map((p) => p.x));
  const xMax = Math.max(xMin + 1, ...all.map((p) => p.x));
  const yMin = Math.min(0, ...all.map((p) => p.y));
  const yMax = Math.max(1, ...all.map((p) => p.y));
  const sx = (x: number) => margin.left + ((x - xMin) / (xMax - xMin)) * plotWidth;
  const sy = (y: number) => margin.top + plotHeight - ((y - yMin) / (yMax - yMin)) * plotHeight;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14">${escapeXml(options.title)}</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const y = yMin + ((yMax - yMin) * i) / 4;
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotWidth}" y1="${sy(y)}" y2="${sy(y)}" stroke="#ddd"/>`,
    );
    parts.push(
      `<text x="${margin.left - 6}" y="${sy(y) + 4}" text-anchor="end">${y.toFixed(2)}</text>`,
    );
    const x = xMin + ((xMax - xMin) * i) / 4;
    parts.push(
      `<text x="${sx(x)}" y="${margin.top + plotHeight + 16}" text-anchor="middle">${Math.round(x)}</text>`,
    );
  }
  parts.push(
    `<rect x="${margin.left}" y="${margin.top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#333"/>`,
  );
  parts.push(
    `<text x="${margin.left + plotWidth / 2}" y="${height - 8}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
  );
  parts.push(
    `<text transform="translate(14 ${margin.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">${escapeXml(options.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const points = [...s.points].sort((a, b) => a.x - b.x);
    if (points.length) {
      const d = points
        .map((p, k) => `${k ? "L" : "M"}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`)
        .join(" ");
      parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
      for (const p of points)
        parts.push(
          `<circle cx="${sx(p.x).toFixed(1)}" cy="${sy(p.y).toFixed(1)}" r="2.5" fill="${color}"/>`,
        );
    }
    const ly = margin.top + 14 + i * 18;
    parts.push(
      `<line x1="${width - margin.right + 12}" x2="${width - margin.right + 32}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"/>`,
    );
    parts.push(`<text x="${width - margin.right + 38}" y="${ly}">${escapeXml(s.name)}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n");
}
