// Twilio's classic error body, the only error shape under /proxy (docs/twilio-proxy.md): the SDK
// turns `{code, message, more_info, status}` into a RestException. Never `type` with `title`: the
// SDK would take the body for RFC 9457 and throw a different class.

import { MasklineError } from '../../engine/errors.js'

/** A Twilio error answer: HTTP status, Twilio's numeric code, the message (never a number or secret). */
export class TwilioError extends MasklineError {
  readonly status: number
  readonly twilioCode: number

  constructor(status: number, twilioCode: number, message: string) {
    super('ML_ERR_TWILIO_PROXY', message)
    this.status = status
    this.twilioCode = twilioCode
  }
}

export interface TwilioErrorBody { code: number; message: string; more_info: string; status: number }

export function errorBody(e: TwilioError): TwilioErrorBody {
  return { code: e.twilioCode, message: e.message, more_info: `https://www.twilio.com/docs/errors/${e.twilioCode}`, status: e.status }
}

export const authenticate = () => new TwilioError(401, 20003, 'Authenticate')
export const notFound = (path: string) => new TwilioError(404, 20404, `The requested resource ${path} was not found`)
export const methodNotAllowed = (what: string) => new TwilioError(405, 20004, `Method not allowed: ${what}`)
export const tooManyRequests = () => new TwilioError(429, 20429, 'Too Many Requests')
export const internal = () => new TwilioError(500, 20500, 'Internal Server Error')
export const unavailable = () => new TwilioError(503, 20500, 'Service temporarily unavailable; retry')
/** 80701: a parameter that is missing, of the wrong type or not one of its values. */
export const invalidParam = (name: string) => new TwilioError(400, 80701, `'${name}' is invalid.`)
/** A façade rule (806xx and friends); 400 unless Twilio documents otherwise (docs/twilio-proxy.md, "Departures from Twilio"). */
export const rule = (code: number, message: string, status = 400) => new TwilioError(status, code, message)
