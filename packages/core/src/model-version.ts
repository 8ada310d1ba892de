/**
 * @module The model version a client names (a route's `{version}`, a request's `model_version`).
 * Triton: server/src/common.cc GetModelVersionFromString
 */
import { Errors } from './errors.js';

const INT64_MAX = 2n ** 63n - 1n;
/** A version as most clients send it: digits that are a safe integer whatever they are. */
const SHORT_VERSION = /^\d{1,15}$/;
/** What std::stol reads: leading white space, a sign, digits; what follows the digits is ignored. */
const STOL_PREFIX = /^[ \t\n\v\f\r]*([+-]?)(\d+)/;

/**
 * Reads the version a client names, as Triton's GetModelVersionFromString does with std::stol
 * (on every route of both protocols): "" is the version policy's choice; leading white space, a
 * sign and leading zeros are taken and what follows the digits is ignored (`" 2"`, `"+2"`, `"02"`,
 * `"2abc"` are version 2); no digits, or a number past int64, is refused with Triton's
 * "(details: stol)" text, a negative one with its "invalid model version specified" text.
 * @returns a bigint for a version past 2^53, which no model has (version folders are safe integers)
 * @throws INVALID_ARG with Triton's words
 */
export function parseModelVersion(version: string | undefined): number | bigint | undefined {
  if (version === undefined || version === '') return undefined;
  if (SHORT_VERSION.test(version)) return Number(version);
  const m = STOL_PREFIX.exec(version);
  // No digits: std::stol's invalid_argument.
  if (!m) throw Errors.badVersion(version, 'stol');
  const digits = m[2]!.replace(/^0+(?=\d)/, '');
  // Past 19 digits a number is past int64 (told without making a bigint of a huge one): out_of_range.
  if (digits.length > 19) throw Errors.badVersion(version, 'stol');
  const v = m[1] === '-' ? -BigInt(digits) : BigInt(digits);
  if (v > INT64_MAX || v < -INT64_MAX - 1n) throw Errors.badVersion(version, 'stol');
  if (v < 0n) throw Errors.negativeVersion(version);
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}
