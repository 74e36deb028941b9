// A self-signed X.509 certificate for 127.0.0.1 and localhost, made with node:crypto alone (no
// openssl binary on the test machine needed): the DER of an ECDSA P-256 certificate written out
// by hand. The TLS tests trust exactly this certificate (`ca`), so verification stays on.
import { generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto'

/** One DER TLV: tag, definite length, content. */
function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content)
  const n = body.length
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff])
  return Buffer.concat([Buffer.from([tag]), len, body])
}

const seq = (...c: Buffer[]) => der(0x30, ...c)
const oid = (hex: string) => der(0x06, Buffer.from(hex, 'hex'))
const ECDSA_SHA256 = seq(oid('2a8648ce3d040302')) // 1.2.840.10045.4.3.2
const COMMON_NAME = oid('550403') // 2.5.4.3
const BASIC_CONSTRAINTS = oid('551d13') // 2.5.29.19
const SUBJECT_ALT_NAME = oid('551d11') // 2.5.29.17

/** UTCTime, YYMMDDHHMMSSZ. */
function utcTime(d: Date): Buffer {
  return der(0x17, Buffer.from(d.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z'))
}

export interface SelfSigned {
  /** PEM certificate: what nginx serves and what the client trusts. */
  cert: string
  /** PEM PKCS#8 private key. */
  key: string
}

export function selfSignedCertificate(commonName = 'localhost'): SelfSigned {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const name = seq(der(0x31, seq(COMMON_NAME, der(0x0c, Buffer.from(commonName)))))
  const serial = randomBytes(8)
  // A positive INTEGER in DER's minimal form: top bit clear, and a first byte that is not 0x00
  // (a 0x00 followed by a byte below 0x80 is padding DER forbids: ~1 certificate in 512 failed
  // to parse, "illegal padding").
  serial[0] = (serial[0]! & 0x7f) | 0x40
  const now = Date.now()
  const tbs = seq(
    der(0xa0, der(0x02, Buffer.from([2]))), // v3
    der(0x02, serial),
    ECDSA_SHA256,
    name,
    seq(utcTime(new Date(now - 3_600_000)), utcTime(new Date(now + 86_400_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    der(0xa3, seq(
      // A trust anchor of its own: cA true (critical).
      seq(BASIC_CONSTRAINTS, der(0x01, Buffer.from([0xff])), der(0x04, seq(der(0x01, Buffer.from([0xff]))))),
      // iPAddress 127.0.0.1, dNSName localhost.
      seq(SUBJECT_ALT_NAME, der(0x04, seq(der(0x87, Buffer.from([127, 0, 0, 1])), der(0x82, Buffer.from('localhost'))))),
    )),
  )
  const signature = sign('sha256', tbs, privateKey) // DER ECDSA-Sig-Value
  const certDer = seq(tbs, ECDSA_SHA256, der(0x03, Buffer.from([0]), signature))
  const cert = new X509Certificate(certDer) // throws on a malformed encoding
  if (!cert.verify(publicKey)) throw new Error('self-signed certificate does not verify')
  return { cert: cert.toString(), key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }
}
