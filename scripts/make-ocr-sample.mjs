// Renders examples/ocr/sample.png (and .jpg): two lines of known text, for the OCR pipeline's
// tests and README demo. Needs fonts on the machine (DejaVu Sans here); the PNG is committed, so
// the tests do not run this. Usage: node scripts/make-ocr-sample.mjs
import sharp from 'sharp';

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="200">
  <rect width="100%" height="100%" fill="white"/>
  <text x="30" y="80" font-family="DejaVu Sans, sans-serif" font-size="40" fill="black">Hello Triode 2026</text>
  <text x="30" y="150" font-family="DejaVu Sans, sans-serif" font-size="40" fill="black">inference server</text>
</svg>`;
await sharp(Buffer.from(svg)).png().toFile('examples/ocr/sample.png');
await sharp(Buffer.from(svg)).jpeg({ quality: 90 }).toFile('examples/ocr/sample.jpg');
console.log('wrote examples/ocr/sample.png and sample.jpg');
