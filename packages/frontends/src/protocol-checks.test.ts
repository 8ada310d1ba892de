import { describe, expect, it } from 'vitest';
import { serializeBytesTensor } from '@triode/core';
import { jsonToTensorData } from './http/json-tensor.js';
import { checkTensorBytes } from './protocol-checks.js';

const words = (n: number) => serializeBytesTensor(Array.from({ length: n }, (_, i) => `w${i}`));

describe('checkTensorBytes() on BYTES (HTTP binary, gRPC raw)', () => {
  it('answers too few elements with Triton\'s text (core infer_request.cc ValidateBytesInputs)', () => {
    expect(() => checkTensorBytes('IN', 'BYTES', [5], words(2), 'M')).toThrow("expected 5 string elements for inference input 'IN' for model 'M', got 2");
  });

  it('answers too many elements with the count where the data overran (expected + 1), not the total', () => {
    expect(() => checkTensorBytes('IN', 'BYTES', [5], words(7), 'M'))
      .toThrow("unexpected number of string elements 6 for inference input 'IN' for model 'M', expecting 5");
  });

  it('answers a length indicator cut short, and an element running past the end, with Triton\'s texts', () => {
    const cut = new Uint8Array([...words(1), 9, 0]);
    expect(() => checkTensorBytes('IN', 'BYTES', [2], cut, 'M')).toThrow(
      "incomplete string length indicator for inference input 'IN' for model 'M', expecting 4 bytes but only 2 bytes available. Please make sure the string length indicator is in one buffer.",
    );
    const over = new Uint8Array([200, 0, 0, 0, 1]);
    expect(() => checkTensorBytes('IN', 'BYTES', [1], over, 'M'))
      .toThrow("incomplete string data for inference input 'IN' for model 'M', expecting string of length 200 but only 1 bytes available");
  });

  it('accepts exactly the expected elements', () => {
    expect(() => checkTensorBytes('IN', 'BYTES', [5], words(5), 'M')).not.toThrow();
  });
});

describe('checkTensorBytes() and jsonToTensorData() print a huge shape\'s count exactly', () => {
  it('a byte size past 2^53 is printed exactly (before: 73786976294838210000)', () => {
    expect(() => checkTensorBytes('IN', 'FP32', [4294967296, 4294967296], new Uint8Array(4), 'M'))
      .toThrow("input byte size mismatch for input 'IN' for model 'M'. Expected 73786976294838206464, got 4");
    expect(() => checkTensorBytes('IN', 'BYTES', [4294967296, 4294967297], words(1), 'M'))
      .toThrow("expected 18446744078004518912 string elements for inference input 'IN' for model 'M', got 1");
  });

  it('a JSON element count past 2^53 is printed exactly (before: 18446744073709552000)', () => {
    const shape = [4294967296, 4294967296];
    expect(() => jsonToTensorData([1], 'INT32', 4294967296 * 4294967296, 'IN', shape))
      .toThrow("Unable to parse 'data': Shape does not match true shape of 'data' field for input 'IN': expected 18446744073709551616 elements, got 1");
  });
});
