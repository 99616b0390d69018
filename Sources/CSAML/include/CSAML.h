#ifndef GATEHOUSE_CSAML_H
#define GATEHOUSE_CSAML_H

// The C side of Gatehouse's SAML service provider: what Swift cannot call in xmlsec (its transform and key ids are
// macros over functions) and raw DEFLATE for the HTTP-Redirect binding. The structure of a SAML message, which nodes
// are read and which must be signed, is decided in Swift (Sources/GatehouseServer/SSO/SAML/); these functions only
// verify, decrypt and compress what they are handed.
//
// Error messages written to `error` are short and name an algorithm or a step, never the document's content.

#include <stddef.h>

// Debian's libxml2 is built with ICU, and its encoding.h then includes the system's ICU headers (libicu-dev), whose
// types clash with the copy Foundation carries (_FoundationICU) wherever Swift sees both: a clean build fails with
// "'UErrorCode' has different definitions in different modules". Nothing here uses libxml2's ICU converters (only
// pointers to encoding handlers pass through, never the handler itself), so encoding.h's ICU part is left out.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/tree.h>

/// Initialises libxml2 and xmlsec once for the process, and on the calling thread sends libxml2's error output
/// nowhere (libxml2's error handlers are per thread). Call before parsing. Returns 0, or -1 when xmlsec failed to
/// initialise.
int gh_saml_prepare(void);

/// Verifies the enveloped XML signature `signature` (a ds:Signature element) with the key of one X.509 certificate
/// (DER). The key is set before verification, so KeyInfo in the document is never read. Only exclusive and inclusive
/// canonicalisation, the enveloped-signature transform, SHA-256/384/512 digests and RSA or ECDSA with SHA-256/384/512
/// are allowed; the signature must hold exactly one Reference, to this document, whose URI is `expected_uri`
/// ("#" + the ID of the element the signature sits in). Returns 0 when the signature verifies, -1 otherwise.
int gh_saml_verify_signature(xmlNodePtr signature, const unsigned char *cert_der, size_t cert_der_len,
                             const char *expected_uri, char *error, size_t error_len);

/// Decrypts `encrypted_data` (an xenc:EncryptedData element whose KeyInfo holds an xenc:EncryptedKey) with the RSA
/// private key in `key_pem`, and replaces it in its document with the decrypted element, which is returned. The key
/// must be transported with RSA-OAEP (rsa-1_5 is refused) and the data encrypted with AES-CBC or AES-GCM. Returns
/// NULL on failure.
xmlNodePtr gh_saml_decrypt(xmlNodePtr encrypted_data, const char *key_pem, size_t key_pem_len, char *error,
                           size_t error_len);

/// Signs `element` for tests: an enveloped signature with exclusive canonicalisation, RSA-SHA256 and a SHA-256
/// digest (RSA-SHA1 and SHA-1 when `sha1` is non-zero, to test their refusal), referencing "#" + `element_id`,
/// inserted after the element's first child when that is an Issuer, else first. The ID must already be registered in
/// the document (xmlAddID). Returns 0, or -1.
int gh_saml_sign(xmlNodePtr element, const char *element_id, const char *key_pem, size_t key_pem_len, int sha1,
                 char *error, size_t error_len);

/// Encrypts `element` for tests, as an IdP does: AES-256-CBC (or AES-256-GCM when `gcm` is non-zero) with a fresh
/// session key transported to the certificate's RSA key with `key_transport` ("http://www.w3.org/2001/04/xmlenc#rsa-
/// oaep-mgf1p" or "…#rsa-1_5"). The element is replaced by the xenc:EncryptedData. Returns 0, or -1.
int gh_saml_encrypt(xmlNodePtr element, const unsigned char *cert_der, size_t cert_der_len, int gcm,
                    const char *key_transport, char *error, size_t error_len);

/// Compresses `input` as raw DEFLATE (no zlib header, as the HTTP-Redirect binding sends it) into `output`.
/// Returns the length written, or -1 when `output_capacity` is too small or zlib fails.
long gh_deflate_raw(const unsigned char *input, size_t input_len, unsigned char *output, size_t output_capacity);

/// Decompresses raw DEFLATE `input` into `output`. Returns the length written, -1 for data that is not DEFLATE or is
/// truncated, and -2 when the result would exceed `output_capacity` (the cap against decompression bombs).
long gh_inflate_raw(const unsigned char *input, size_t input_len, unsigned char *output, size_t output_capacity);

#endif
