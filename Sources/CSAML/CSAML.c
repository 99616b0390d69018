#include "CSAML.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

// libxml2 and xmlsec, with the macros xmlsec was built with (see there).
#include "../CXMLSec/shim.h"

// MARK: - Errors

// xmlsec reports through one process-wide callback; the first report of the current call is kept per thread, so that
// concurrent calls never see each other's errors, and nothing reaches stderr.
static _Thread_local char gh_detail[160];

static void gh_xmlsec_error(const char *file, int line, const char *func, const char *errorObject,
                            const char *errorSubject, int reason, const char *msg) {
    (void)file;
    (void)line;
    (void)func;
    (void)errorObject;
    (void)reason;
    if (gh_detail[0] != '\0') {
        return;  // keep the cause, not the unwinding that follows it
    }
    snprintf(gh_detail, sizeof gh_detail, "%s: %s", errorSubject ? errorSubject : "xmlsec", msg ? msg : "error");
}

static void gh_xml_generic_error(void *context, const char *message, ...) {
    (void)context;
    (void)message;
}

static void gh_xml_structured_error(void *context, xmlErrorPtr error) {
    (void)context;
    (void)error;
}

/// Writes "what failed (xmlsec's first complaint)" to the caller's buffer.
static void gh_fail(char *error, size_t error_len, const char *what) {
    if (error == NULL || error_len == 0) {
        return;
    }
    if (gh_detail[0] != '\0') {
        snprintf(error, error_len, "%s (%s)", what, gh_detail);
    } else {
        snprintf(error, error_len, "%s", what);
    }
}

// MARK: - Initialisation

static pthread_once_t gh_once = PTHREAD_ONCE_INIT;
static int gh_init_status = -1;

static void gh_initialise(void) {
    xmlInitParser();
    xmlSecErrorsSetCallback(gh_xmlsec_error);
    if (xmlSecInit() < 0) {
        return;
    }
    if (xmlSecCheckVersion() != 1) {
        return;
    }
    // NULL: OpenSSL's default configuration; no engine or key store is named.
    if (xmlSecCryptoAppInit(NULL) < 0 || xmlSecCryptoInit() < 0) {
        return;
    }
    gh_init_status = 0;
}

int gh_saml_prepare(void) {
    pthread_once(&gh_once, gh_initialise);
    // libxml2 keeps its error handlers per thread.
    xmlSetGenericErrorFunc(NULL, gh_xml_generic_error);
    xmlSetStructuredErrorFunc(NULL, gh_xml_structured_error);
    gh_detail[0] = '\0';
    return gh_init_status;
}

// MARK: - Signatures

int gh_saml_verify_signature(xmlNodePtr signature, const unsigned char *cert_der, size_t cert_der_len,
                             const char *expected_uri, char *error, size_t error_len) {
    if (gh_saml_prepare() < 0) {
        gh_fail(error, error_len, "xmlsec is not initialised");
        return -1;
    }
    if (signature == NULL || cert_der == NULL || expected_uri == NULL || cert_der_len > 1 << 20) {
        gh_fail(error, error_len, "nothing to verify");
        return -1;
    }
    int result = -1;
    xmlSecDSigCtxPtr context = NULL;
    xmlSecKeyPtr key = xmlSecCryptoAppKeyLoadMemory(cert_der, (xmlSecSize)cert_der_len, xmlSecKeyDataFormatCertDer,
                                                    NULL, NULL, NULL);
    if (key == NULL) {
        gh_fail(error, error_len, "the certificate's key could not be read");
        goto done;
    }
    // No keys manager: KeyInfo in the document is never read. The key is the configured certificate's.
    context = xmlSecDSigCtxCreate(NULL);
    if (context == NULL) {
        xmlSecKeyDestroy(key);
        gh_fail(error, error_len, "out of memory");
        goto done;
    }
    context->signKey = key;  // the context owns it from here
    context->flags |= XMLSEC_DSIG_FLAGS_IGNORE_MANIFESTS;
    context->enabledReferenceUris = xmlSecTransformUriTypeSameDocument;

    // What a Reference may use: canonicalisation, the enveloped-signature transform and a SHA-2 digest.
    xmlSecTransformId reference_transforms[] = {
        xmlSecTransformExclC14NId,  xmlSecTransformExclC14NWithCommentsId, xmlSecTransformInclC14NId,
        xmlSecTransformInclC14N11Id, xmlSecTransformEnvelopedId,            xmlSecTransformSha256Id,
        xmlSecTransformSha384Id,    xmlSecTransformSha512Id,
    };
    // What SignedInfo may use: canonicalisation and RSA or ECDSA over SHA-2. No SHA-1, no HMAC, no DSA.
    xmlSecTransformId signature_transforms[] = {
        xmlSecTransformExclC14NId,    xmlSecTransformExclC14NWithCommentsId, xmlSecTransformInclC14NId,
        xmlSecTransformInclC14N11Id,  xmlSecTransformRsaSha256Id,            xmlSecTransformRsaSha384Id,
        xmlSecTransformRsaSha512Id,   xmlSecTransformEcdsaSha256Id,          xmlSecTransformEcdsaSha384Id,
        xmlSecTransformEcdsaSha512Id,
    };
    for (size_t i = 0; i < sizeof reference_transforms / sizeof reference_transforms[0]; i++) {
        if (xmlSecDSigCtxEnableReferenceTransform(context, reference_transforms[i]) < 0) {
            gh_fail(error, error_len, "could not restrict the reference transforms");
            goto done;
        }
    }
    for (size_t i = 0; i < sizeof signature_transforms / sizeof signature_transforms[0]; i++) {
        if (xmlSecDSigCtxEnableSignatureTransform(context, signature_transforms[i]) < 0) {
            gh_fail(error, error_len, "could not restrict the signature transforms");
            goto done;
        }
    }

    if (xmlSecDSigCtxVerify(context, signature) < 0) {
        gh_fail(error, error_len, "the signature could not be processed");
        goto done;
    }
    if (context->status != xmlSecDSigStatusSucceeded) {
        gh_fail(error, error_len, "the signature does not match the signed content");
        goto done;
    }
    // One Reference, to the element the signature sits in: anything more could sign a node the reader never reads.
    if (xmlSecPtrListGetSize(&context->signedInfoReferences) != 1) {
        gh_fail(error, error_len, "the signature must hold exactly one reference");
        goto done;
    }
    xmlSecDSigReferenceCtxPtr reference = xmlSecPtrListGetItem(&context->signedInfoReferences, 0);
    if (reference == NULL || reference->uri == NULL || strcmp((const char *)reference->uri, expected_uri) != 0) {
        gh_fail(error, error_len, "the signature references another element than the one it signs");
        goto done;
    }
    result = 0;

done:
    if (context != NULL) {
        xmlSecDSigCtxDestroy(context);
    }
    return result;
}

// MARK: - Decryption

xmlNodePtr gh_saml_decrypt(xmlNodePtr encrypted_data, const char *key_pem, size_t key_pem_len, char *error,
                           size_t error_len) {
    if (gh_saml_prepare() < 0) {
        gh_fail(error, error_len, "xmlsec is not initialised");
        return NULL;
    }
    if (encrypted_data == NULL || encrypted_data->parent == NULL || key_pem == NULL || key_pem_len > 1 << 16) {
        gh_fail(error, error_len, "nothing to decrypt");
        return NULL;
    }
    // Only an encrypted element is replaced in place; content or raw data would leave no single node to return.
    xmlChar *type = xmlGetNoNsProp(encrypted_data, BAD_CAST "Type");
    int is_element = type != NULL && xmlStrEqual(type, xmlSecTypeEncElement);
    xmlFree(type);
    if (!is_element) {
        gh_fail(error, error_len, "the encrypted data is not an element");
        return NULL;
    }

    xmlNodePtr decrypted = NULL;
    xmlSecEncCtxPtr context = NULL;
    // A plain key store holding our one key. (The crypto engine's default manager would also build an X.509 store
    // and load the system's trust anchors, some 20 ms a call, for nothing: decryption trusts no certificate.)
    xmlSecKeysMngrPtr manager = xmlSecKeysMngrCreate();
    xmlSecKeyStorePtr store = manager != NULL ? xmlSecKeyStoreCreate(xmlSecSimpleKeysStoreId) : NULL;
    if (store == NULL || xmlSecKeysMngrAdoptKeysStore(manager, store) < 0) {
        if (store != NULL) {
            xmlSecKeyStoreDestroy(store);
        }
        gh_fail(error, error_len, "could not create a key store");
        goto done;
    }
    manager->getKey = xmlSecKeysMngrGetKey;  // what the default manager sets: KeyInfo, then the store
    xmlSecKeyPtr key = xmlSecCryptoAppKeyLoadMemory((const xmlSecByte *)key_pem, (xmlSecSize)key_pem_len,
                                                    xmlSecKeyDataFormatPem, NULL, NULL, NULL);
    if (key == NULL) {
        gh_fail(error, error_len, "the service provider's private key could not be read");
        goto done;
    }
    if (xmlSecCryptoAppDefaultKeysMngrAdoptKey(manager, key) < 0) {
        xmlSecKeyDestroy(key);
        gh_fail(error, error_len, "could not store the private key");
        goto done;
    }
    context = xmlSecEncCtxCreate(manager);
    if (context == NULL) {
        gh_fail(error, error_len, "out of memory");
        goto done;
    }
    // The data: AES-CBC or AES-GCM, its cipher text inline (no CipherReference), its key from an EncryptedKey only.
    xmlSecTransformId data_transforms[] = {
        xmlSecTransformAes128CbcId, xmlSecTransformAes192CbcId, xmlSecTransformAes256CbcId,
        xmlSecTransformAes128GcmId, xmlSecTransformAes192GcmId, xmlSecTransformAes256GcmId,
    };
    for (size_t i = 0; i < sizeof data_transforms / sizeof data_transforms[0]; i++) {
        if (xmlSecPtrListAdd(&context->transformCtx.enabledTransforms, (void *)data_transforms[i]) < 0) {
            gh_fail(error, error_len, "could not restrict the data algorithms");
            goto done;
        }
    }
    context->transformCtx.enabledUris = xmlSecTransformUriTypeNone;
    if (xmlSecPtrListAdd(&context->keyInfoReadCtx.enabledKeyData, (void *)xmlSecKeyDataEncryptedKeyId) < 0 ||
        xmlSecKeyInfoCtxCreateEncCtx(&context->keyInfoReadCtx) < 0) {
        gh_fail(error, error_len, "could not restrict the key transport");
        goto done;
    }
    // The EncryptedKey: RSA-OAEP to our key, which comes from the key store, not from anything in its KeyInfo
    // (KeyName, the only kind enabled there, can only name a key of that store).
    xmlSecEncCtxPtr key_context = context->keyInfoReadCtx.encCtx;
    xmlSecPtrListEmpty(&key_context->keyInfoReadCtx.enabledKeyData);
    if (xmlSecPtrListAdd(&key_context->transformCtx.enabledTransforms, (void *)xmlSecTransformRsaOaepId) < 0 ||
        xmlSecPtrListAdd(&key_context->keyInfoReadCtx.enabledKeyData, (void *)xmlSecKeyDataNameId) < 0) {
        gh_fail(error, error_len, "could not restrict the key transport");
        goto done;
    }
    key_context->transformCtx.enabledUris = xmlSecTransformUriTypeNone;

    // The decrypted nodes take EncryptedData's place, between its neighbours; EncryptedData itself is freed.
    xmlNodePtr parent = encrypted_data->parent;
    xmlNodePtr before = encrypted_data->prev;
    xmlNodePtr after = encrypted_data->next;
    if (xmlSecEncCtxDecrypt(context, encrypted_data) < 0 || context->result == NULL) {
        gh_fail(error, error_len, "the assertion could not be decrypted");
        goto done;
    }
    if (!context->resultReplaced) {
        gh_fail(error, error_len, "the decrypted data did not replace the encrypted element");
        goto done;
    }
    xmlNodePtr found = NULL;
    for (xmlNodePtr node = before != NULL ? before->next : parent->children; node != NULL && node != after;
         node = node->next) {
        if (node->type == XML_ELEMENT_NODE) {
            if (found != NULL) {
                gh_fail(error, error_len, "the decrypted data holds more than one element");
                goto done;
            }
            found = node;
        } else if (node->type != XML_TEXT_NODE || !xmlIsBlankNode(node)) {
            gh_fail(error, error_len, "the decrypted data holds more than one element");
            goto done;
        }
    }
    if (found == NULL) {
        gh_fail(error, error_len, "the decrypted data holds no element");
        goto done;
    }
    decrypted = found;

done:
    if (context != NULL) {
        xmlSecEncCtxDestroy(context);
    }
    if (manager != NULL) {
        xmlSecKeysMngrDestroy(manager);
    }
    return decrypted;
}

// MARK: - Test documents

int gh_saml_sign(xmlNodePtr element, const char *element_id, const char *key_pem, size_t key_pem_len, int sha1,
                 char *error, size_t error_len) {
    if (gh_saml_prepare() < 0 || element == NULL || element_id == NULL || key_pem == NULL) {
        gh_fail(error, error_len, "nothing to sign");
        return -1;
    }
    int result = -1;
    xmlSecDSigCtxPtr context = NULL;
    xmlNodePtr signature = xmlSecTmplSignatureCreate(element->doc, xmlSecTransformExclC14NId,
                                                     sha1 ? xmlSecTransformRsaSha1Id : xmlSecTransformRsaSha256Id,
                                                     NULL);
    if (signature == NULL) {
        gh_fail(error, error_len, "could not create the signature template");
        return -1;
    }
    xmlNodePtr first = xmlSecGetNextElementNode(element->children);
    if (first != NULL && xmlStrEqual(first->name, BAD_CAST "Issuer")) {
        xmlAddNextSibling(first, signature);
    } else if (element->children != NULL) {
        xmlAddPrevSibling(element->children, signature);
    } else {
        xmlAddChild(element, signature);
    }
    char uri[256];
    snprintf(uri, sizeof uri, "#%s", element_id);
    xmlNodePtr reference = xmlSecTmplSignatureAddReference(
        signature, sha1 ? xmlSecTransformSha1Id : xmlSecTransformSha256Id, NULL, BAD_CAST uri, NULL);
    if (reference == NULL || xmlSecTmplReferenceAddTransform(reference, xmlSecTransformEnvelopedId) == NULL ||
        xmlSecTmplReferenceAddTransform(reference, xmlSecTransformExclC14NId) == NULL) {
        gh_fail(error, error_len, "could not create the reference");
        goto done;
    }
    context = xmlSecDSigCtxCreate(NULL);
    if (context == NULL) {
        gh_fail(error, error_len, "out of memory");
        goto done;
    }
    context->signKey = xmlSecCryptoAppKeyLoadMemory((const xmlSecByte *)key_pem, (xmlSecSize)key_pem_len,
                                                    xmlSecKeyDataFormatPem, NULL, NULL, NULL);
    if (context->signKey == NULL || xmlSecDSigCtxSign(context, signature) < 0) {
        gh_fail(error, error_len, "could not sign");
        goto done;
    }
    result = 0;

done:
    if (result != 0) {
        xmlUnlinkNode(signature);
        xmlFreeNode(signature);
    }
    if (context != NULL) {
        xmlSecDSigCtxDestroy(context);
    }
    return result;
}

int gh_saml_encrypt(xmlNodePtr element, const unsigned char *cert_der, size_t cert_der_len, int gcm,
                    const char *key_transport, char *error, size_t error_len) {
    if (gh_saml_prepare() < 0 || element == NULL || cert_der == NULL || key_transport == NULL) {
        gh_fail(error, error_len, "nothing to encrypt");
        return -1;
    }
    int result = -1;
    int inserted = 0;
    xmlSecEncCtxPtr context = NULL;
    xmlSecKeysMngrPtr manager = xmlSecKeysMngrCreate();
    xmlNodePtr template = xmlSecTmplEncDataCreate(element->doc,
                                                  gcm ? xmlSecTransformAes256GcmId : xmlSecTransformAes256CbcId,
                                                  NULL, xmlSecTypeEncElement, NULL, NULL);
    if (manager == NULL || template == NULL || xmlSecCryptoAppDefaultKeysMngrInit(manager) < 0) {
        gh_fail(error, error_len, "could not create the template");
        goto done;
    }
    xmlSecKeyPtr key = xmlSecCryptoAppKeyLoadMemory(cert_der, (xmlSecSize)cert_der_len, xmlSecKeyDataFormatCertDer,
                                                    NULL, NULL, NULL);
    if (key == NULL || xmlSecCryptoAppDefaultKeysMngrAdoptKey(manager, key) < 0) {
        gh_fail(error, error_len, "could not read the certificate");
        goto done;
    }
    xmlSecTransformId transport = strcmp(key_transport, "http://www.w3.org/2001/04/xmlenc#rsa-1_5") == 0
                                      ? xmlSecTransformRsaPkcs1Id
                                      : xmlSecTransformRsaOaepId;
    xmlNodePtr key_info = xmlSecTmplEncDataEnsureKeyInfo(template, NULL);
    xmlNodePtr encrypted_key =
        key_info != NULL ? xmlSecTmplKeyInfoAddEncryptedKey(key_info, transport, NULL, NULL, NULL) : NULL;
    if (xmlSecTmplEncDataEnsureCipherValue(template) == NULL || encrypted_key == NULL ||
        xmlSecTmplEncDataEnsureCipherValue(encrypted_key) == NULL) {
        gh_fail(error, error_len, "could not create the template");
        goto done;
    }
    context = xmlSecEncCtxCreate(manager);
    if (context == NULL) {
        gh_fail(error, error_len, "out of memory");
        goto done;
    }
    context->encKey = xmlSecKeyGenerate(xmlSecKeyDataAesId, 256, xmlSecKeyDataTypeSession);
    if (context->encKey == NULL || xmlSecEncCtxXmlEncrypt(context, template, element) < 0) {
        gh_fail(error, error_len, "could not encrypt");
        goto done;
    }
    inserted = 1;  // the template replaced the element, which xmlsec freed
    result = 0;

done:
    if (!inserted && template != NULL) {
        xmlFreeNode(template);
    }
    if (context != NULL) {
        xmlSecEncCtxDestroy(context);
    }
    if (manager != NULL) {
        xmlSecKeysMngrDestroy(manager);
    }
    return result;
}

// MARK: - Raw DEFLATE

long gh_deflate_raw(const unsigned char *input, size_t input_len, unsigned char *output, size_t output_capacity) {
    z_stream stream;
    memset(&stream, 0, sizeof stream);
    // windowBits -15: raw DEFLATE, no zlib header or checksum (SAML bindings, section 3.4.4.1).
    if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return -1;
    }
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)input_len;
    stream.next_out = output;
    stream.avail_out = (uInt)output_capacity;
    int status = deflate(&stream, Z_FINISH);
    long written = (long)stream.total_out;
    deflateEnd(&stream);
    return status == Z_STREAM_END ? written : -1;
}

long gh_inflate_raw(const unsigned char *input, size_t input_len, unsigned char *output, size_t output_capacity) {
    z_stream stream;
    memset(&stream, 0, sizeof stream);
    if (inflateInit2(&stream, -15) != Z_OK) {
        return -1;
    }
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)input_len;
    stream.next_out = output;
    stream.avail_out = (uInt)output_capacity;
    int status = inflate(&stream, Z_FINISH);
    long written = (long)stream.total_out;
    int exhausted = stream.avail_out == 0;
    inflateEnd(&stream);
    if (status == Z_STREAM_END) {
        return written;
    }
    // Z_BUF_ERROR with a full buffer: there was more to come than the cap allows.
    return (status == Z_BUF_ERROR && exhausted) ? -2 : -1;
}
